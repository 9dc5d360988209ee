package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestGrantTimesAndPurge: settlement records each grant at the time the
// grab answered (Redis' clock, the stream entry's), and the draw log
// states it; once the retention after the refund has passed, the sweep
// deletes the draw data, once: the commitment stays, the draw log and
// the proofs answer that they are past their retention, reconcile still
// holds.
func TestGrantTimesAndPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.SharedRedis(t)
	l := openSQLite(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 40})
	require.NoError(t, err)
	before, err := eng.Commitment(ctx, c.ID)
	require.NoError(t, err)

	granted := map[string]hongbao.Grant{}
	for _, u := range []string{"ann", "bob", "cy"} {
		g, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		require.False(t, g.GrantedAt.IsZero(), "a grant answers its time")
		require.WithinDuration(t, time.Now(), g.GrantedAt, time.Minute)
		granted[u] = g
	}
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "w", Logger: quiet(), Only: []string{c.ID},
		DrawDataRetention: 24 * time.Hour})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	cm := l.(ledger.Committer)
	for u, g := range granted {
		held, err := eng.GrantTime(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, g.Seq, held.Seq)
		require.True(t, g.GrantedAt.Equal(held.GrantedAt), "%s: the grab said %v, the ledger %v", u, g.GrantedAt, held.GrantedAt)
		user, at, err := cm.GrantTime(ctx, c.ID, g.Seq)
		require.NoError(t, err)
		require.Equal(t, u, user)
		require.True(t, g.GrantedAt.Equal(at))
	}
	log := new(countingWriter)
	require.NoError(t, eng.DrawLog(ctx, c.ID, -1, time.Now(), log))
	require.Positive(t, log.n)

	n, err := w.PurgeDrawData(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "refunded less than the retention ago: kept")
	later := time.Now().Add(24*time.Hour + time.Minute)
	n, err = w.PurgeDrawData(ctx, later)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = w.PurgeDrawData(ctx, later)
	require.NoError(t, err)
	require.Zero(t, n, "a second sweep purges nothing")

	after, err := eng.Commitment(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, before, after, "the commitment stays")
	_, err = cm.Salts(ctx, c.ID)
	require.ErrorIs(t, err, ledger.ErrDrawDataPurged)
	err = eng.DrawLog(ctx, c.ID, -1, time.Now(), new(countingWriter))
	require.ErrorIs(t, err, hongbao.ErrDrawLogExpired)
	_, err = eng.Proof(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrDrawLogExpired)
	rep, err := settle.Reconcile(ctx, r.Client, "", l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.True(t, rep.DrawDataPurged)

	keep, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "k", Logger: quiet(), DrawDataRetention: -1})
	require.NoError(t, err)
	n, err = keep.PurgeDrawData(ctx, later.Add(1000*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n, "a negative retention keeps everything")
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
