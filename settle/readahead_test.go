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
	"github.com/hongbao/hongbao/settle"
)

// failSecond is a ledger whose second grants write finds the database
// gone (the write fails and so does the ping), and every write after it
// finds it back.
type failSecond struct {
	ledger.Ledger
	calls atomic.Int64
	down  atomic.Bool
}

func (f *failSecond) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	if f.calls.Add(1) == 2 {
		f.down.Store(true)
		return ledger.ApplyResult{}, errDown
	}
	return f.Ledger.ApplyGrants(ctx, c, gs)
}

func (f *failSecond) Ping(ctx context.Context) error {
	if f.down.Swap(false) {
		return errDown
	}
	return f.Ledger.Ping(ctx)
}

// TestReadAheadSettlesOnce: the worker reads the next entries while the
// ledger writes the ones before; when that write fails, the entries read
// ahead stay pending at the worker with the failed ones, and the next
// pass settles every grant exactly once.
func TestReadAheadSettlesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100000, Count: 300})
	require.NoError(t, err)
	for u := 0; u < 20; u++ { // one at a time: one stream entry each
		_, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
	}
	f := &failSecond{Ledger: e.l}
	w, err := settle.New(settle.Config{
		Redis: e.redis.Client, Ledger: f, Consumer: "ahead", Logger: quiet(), Only: []string{c.ID},
		ReadCount: 2, Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	_, err = w.Pass(ctx)
	require.Error(t, err, "the second write failed")
	store := redisstore.New(e.redis.Client)
	g, err := store.Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.EqualValues(t, 4, g.Pending, "the failed batch and the one read ahead of it stay pending")
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, tot.GrantCount, "only the first batch is written")

	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, 20, rep.GrantedLedger)
	require.Zero(t, rep.Dead)
}
