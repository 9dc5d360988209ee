package hongbao_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// TestAuditCatchesCorruption breaks a campaign's contents in Redis, one way
// at a time, and requires the audit to say so: a check that cannot fail
// proves nothing.
func TestAuditCatchesCorruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eng, r := newEngine(t)
	cl := r.Client
	do := func(t *testing.T, cmd ...string) {
		t.Helper()
		require.NoError(t, cl.Do(ctx, cl.B().Arbitrary(cmd[0]).Args(cmd[1:]...).Build()).Error())
	}
	// A campaign of 10 packets of 100 cents, 4 of them granted to u1..u4.
	setup := func(t *testing.T) (redisstore.Keys, map[string]hongbao.Grant) {
		t.Helper()
		c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, Split: "fixed"})
		got := map[string]hongbao.Grant{}
		for _, u := range []string{"u1", "u2", "u3", "u4"} {
			g, err := eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
			require.Equal(t, hongbao.Granted, g.Outcome)
			got[u] = g
		}
		a, err := eng.Audit(ctx, c.ID)
		require.NoError(t, err)
		require.True(t, a.OK(), "before corruption: %v", a.Problems)
		return redisstore.Default.CampaignKeys(c.ID), got
	}
	campaignOf := func(k redisstore.Keys) string {
		// hb:{c:<id>}:meta
		return strings.TrimSuffix(strings.TrimPrefix(k.Meta, "hb:{c:"), "}:meta")
	}
	claim := func(g hongbao.Grant) string { return fmt.Sprintf("%d:%d", g.Seq, g.Cents) }

	cases := []struct {
		name    string
		corrupt func(t *testing.T, k redisstore.Keys, got map[string]hongbao.Grant)
		want    string
		dupUser bool
		dupPkt  bool
	}{
		{"a packet claimed twice", func(t *testing.T, k redisstore.Keys, got map[string]hongbao.Grant) {
			do(t, "HSET", k.Claims, "u9", claim(got["u1"]))
			do(t, "HINCRBY", k.Meta, "granted_count", "1")
			do(t, "HINCRBY", k.Meta, "granted_cents", "100")
		}, "is claimed by", false, true},
		{"a user granted twice in the stream", func(t *testing.T, k redisstore.Keys, got map[string]hongbao.Grant) {
			do(t, "XADD", k.Grants, "*", "u1", claim(got["u2"]))
		}, "granted 2 times in the stream", true, true},
		{"a claim of a packet still in the pool", func(t *testing.T, k redisstore.Keys, _ map[string]hongbao.Grant) {
			do(t, "HSET", k.Claims, "u9", "1:100")
			do(t, "HINCRBY", k.Meta, "granted_count", "1")
			do(t, "HINCRBY", k.Meta, "granted_cents", "100")
		}, "still in the pool", false, false},
		{"a cent lost from the pool", func(t *testing.T, k redisstore.Keys, _ map[string]hongbao.Grant) {
			do(t, "LSET", k.Pool, "0", "1:99")
		}, "conservation", false, false},
		{"a stream grant without a claim", func(t *testing.T, k redisstore.Keys, got map[string]hongbao.Grant) {
			do(t, "HDEL", k.Claims, "u3")
		}, "has no claim", false, false},
		{"counters that disagree with the claims", func(t *testing.T, k redisstore.Keys, _ map[string]hongbao.Grant) {
			do(t, "HINCRBY", k.Meta, "granted_cents", "1")
		}, "granted: counters", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, got := setup(t)
			tc.corrupt(t, k, got)
			a, err := eng.Audit(ctx, campaignOf(k))
			require.NoError(t, err)
			require.False(t, a.OK())
			require.Contains(t, strings.Join(a.Problems, "\n"), tc.want)
			require.Equal(t, tc.dupUser, a.DuplicateUsers > 0, "duplicate users: %v", a.Problems)
			require.Equal(t, tc.dupPkt, a.DuplicatePackets > 0, "duplicate packets: %v", a.Problems)
		})
	}
}
