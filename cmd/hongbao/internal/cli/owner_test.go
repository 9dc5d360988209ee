package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestOwnerCommand: hongbao owner reads the owner a campaign records, in
// its namespace, and changes it only with the owner it records now and a
// reason, recording the new owner in the ledger's terms too.
func TestOwnerCommand(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	ns := testenv.UniqueID(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	l, err := open.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Namespace: ns, Packets: l})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: "moved", Total: 1000, Count: 10})
	require.NoError(t, err)
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: "moved-d", Budget: 1000, Quota: 10})
	require.NoError(t, err)
	redis := "redis://" + r.Addr

	code, out, stderr := run(t, nil, "owner", "--redis", redis, "--namespace", ns, c.ID)
	require.Zero(t, code, stderr)
	require.Equal(t, "moved is owned by "+c.Owner+"\n", out)
	code, _, stderr = run(t, nil, "owner", "--redis", redis, c.ID)
	require.Equal(t, 1, code, "another namespace holds no such campaign")
	require.Contains(t, stderr, "not found")

	code, _, stderr = run(t, nil, "owner", "--redis", redis, "--namespace", ns, "--set", "wallet:b", "--from", "ledger-other", "--reason", "r", c.ID)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, c.Owner, "a refused change names the owner the campaign records")
	code, out, stderr = run(t, nil, "owner", "--redis", redis, "--namespace", ns, "--ledger", dsn,
		"--set", "wallet:b", "--from", c.Owner, "--reason", "settles into b's wallet", "--json", c.ID)
	require.Zero(t, code, stderr)
	var rep ownerReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, ownerReport{Campaign: c.ID, Kind: "red_packet", Owner: "wallet:b", Changed: true}, rep)
	terms, err := l.Terms(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, "wallet:b", terms.Owner)

	code, out, stderr = run(t, nil, "owner", "--redis", redis, "--namespace", ns, "--discount",
		"--set", "wallet:b", "--from", d.Owner, "--reason", "moved", d.ID)
	require.Zero(t, code, stderr)
	require.Equal(t, "moved-d is now owned by wallet:b\n", out)

	for _, args := range [][]string{
		{"owner", "--redis", redis},
		{"owner", "--redis", redis, "a", "b"},
		{"owner", c.ID},
		{"owner", "--redis", redis, "--set", "x", "--reason", "r", c.ID},
		{"owner", "--redis", redis, "--set", "x", "--from", "", c.ID},
		{"owner", "--redis", redis, "--set", "has space", "--from", "", "--reason", "r", c.ID},
		{"owner", "--redis", redis, "--reason", "r", c.ID},
		{"owner", "--redis", redis, "--namespace", "a:b", c.ID},
	} {
		code, _, stderr := run(t, nil, args...)
		require.Equal(t, 2, code, "%s: %s", strings.Join(args, " "), stderr)
	}
}
