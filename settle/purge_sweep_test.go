package settle_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestPurgeSweepPages: one sweep purges every campaign past its
// retention, however many more than one read lists, and none that is not
// refunded (open, or closed and still settling), even far past any
// retention; the refunded campaigns' grants and packets stay.
func TestPurgeSweepPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.SharedRedis(t)
	l := openSQLite(t)
	cm := l.(ledger.Committer)
	commit := func(id string, refund bool) {
		require.NoError(t, l.WritePackets(ctx, id, []int64{30, 70}))
		c := ledger.Commitment{Campaign: id, Count: 2, Cents: 100, Body: []byte(`{}`), HolderKey: bytes.Repeat([]byte{9}, 32)}
		c.Root[0] = 1
		require.NoError(t, cm.WriteCommitment(ctx, c, bytes.Repeat([]byte{1}, 2*ledger.SaltSize)))
		require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "f", Total: 100}))
		_, err := l.ApplyGrants(ctx, id, []ledger.Grant{{Campaign: id, Seq: 2, User: "u", Cents: 70, GrantedAt: 1_790_000_000_000}})
		require.NoError(t, err)
		if refund {
			require.NoError(t, l.Refund(ctx, id, 30))
		}
	}
	const refunded = 3*16 + 5 // more than three reads of the sweep
	for i := 0; i < refunded; i++ {
		commit(fmt.Sprintf("done-%d", i), true)
	}
	for i := 0; i < 5; i++ {
		commit(fmt.Sprintf("live-%d", i), false)
	}
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "p", Logger: quiet(), Only: []string{"none"},
		DrawDataRetention: time.Hour})
	require.NoError(t, err)
	n, err := w.PurgeDrawData(ctx, time.Now().Add(100_000*time.Hour))
	require.NoError(t, err)
	require.Equal(t, refunded, n, "one sweep purges them all")
	for i := 0; i < refunded; i++ {
		id := fmt.Sprintf("done-%d", i)
		_, err := cm.Salts(ctx, id)
		require.ErrorIs(t, err, ledger.ErrDrawDataPurged, id)
		user, _, err := cm.GrantTime(ctx, id, 2)
		require.NoError(t, err, id)
		require.Equal(t, "u", user)
	}
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("live-%d", i)
		s, err := cm.Salts(ctx, id)
		require.NoError(t, err, "%s is not refunded: kept", id)
		require.Len(t, s, 2*ledger.SaltSize)
		c, err := cm.Commitment(ctx, id)
		require.NoError(t, err)
		require.Len(t, c.HolderKey, 32)
	}
	n, err = w.PurgeDrawData(ctx, time.Now().Add(100_000*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n)
}
