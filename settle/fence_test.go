package settle_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
)

// rebuildMidway is a ledger whose first grants batch finds that a rebuild
// ran while the worker held it: the rebuild froze the campaign, fenced the
// ledger and read it, between the worker's read of the stream and its
// commit.
type rebuildMidway struct {
	ledger.Ledger
	rebuild func()
	done    atomic.Bool
}

func (r *rebuildMidway) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	if r.done.CompareAndSwap(false, true) {
		r.rebuild()
	}
	return r.Ledger.ApplyGrants(ctx, c, gs)
}

// TestRebuildFencesBatchInFlight: a batch read from the stream before a
// rebuild fenced the ledger does not commit after it (the rebuild read a
// ledger without those grants and placed their packets itself); it stays
// pending, is not dead-lettered, and settles once the worker reads the
// campaign again, with the fence the rebuild wrote into its meta.
func TestRebuildFencesBatchInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
	require.NoError(t, err)
	require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: hongbao.DefaultFunding, Total: 10_000}))
	for u := range 3 {
		g, err := e.eng.Grab(ctx, c.ID, "f"+strconv.Itoa(u))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	var fence int64
	l := &rebuildMidway{Ledger: e.l, rebuild: func() {
		var err error
		fence, err = e.l.Fence(ctx, c.ID)
		require.NoError(t, err)
	}}
	w := e.worker(t, l, "w1", c.ID)
	_, err = w.Pass(ctx)
	require.ErrorIs(t, err, ledger.ErrFenced)
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.Zero(t, tot.GrantCount, "nothing read before the fence commits after it")
	k := redisstore.Default.CampaignKeys(c.ID)
	g, err := redisstore.New(e.redis.Client).Group(ctx, k)
	require.NoError(t, err)
	require.NotZero(t, g.Pending, "the fenced entries stay pending")
	require.Zero(t, g.Dead, "a fenced batch is not the entries' fault")

	// The rebuild writes the fence into the campaign it rebuilt; the
	// worker reads it with the entries and settles them.
	rc := e.redis.Client
	require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(k.Meta).FieldValue().
		FieldValue(redisstore.LedgerFence, strconv.FormatInt(fence, 10)).Build()).Error())
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	tot, err = e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, tot.GrantCount)
	require.Zero(t, w.Stats().Refused)
}
