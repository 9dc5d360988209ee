package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
	"github.com/hongbao/hongbao/ledger/postgres"
	"github.com/hongbao/hongbao/settle"
)

// TestSettleThroughOutage: the settlement worker writes into PostgreSQL
// through a proxy that is cut mid-run, for longer than the worker's reclaim
// idle time, while grabs go on. The worker backs off; nothing reaches the
// dead stream; when the database is back every grant is in the ledger
// exactly once and the campaign settles with escrow at 0.
func TestSettleThroughOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr
	viaProxy, err := postgres.Open(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = viaProxy.Close() })
	direct, err := postgres.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close() })

	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 3000})
	require.NoError(t, err)
	const reclaimIdle = 200 * time.Millisecond
	w, err := settle.New(settle.Config{
		Redis: r.Client, Ledger: viaProxy, Consumer: "w1", Only: []string{c.ID},
		ReclaimIdle: reclaimIdle, Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	var granted sync.Map
	rain := func(from, to int) {
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := "u" + strconv.Itoa(i)
				g, err := eng.Grab(ctx, c.ID, user)
				if err == nil && g.Outcome == hongbao.Granted {
					granted.Store(user, g.Cents)
				}
			}()
		}
		wg.Wait()
	}
	settled := func() int64 { // safe inside Eventually: no FailNow
		tot, err := direct.Totals(ctx, c.ID)
		if err != nil {
			t.Errorf("read the ledger directly: %v", err)
			return -1
		}
		return tot.GrantCount
	}

	rain(0, 1000)
	require.Eventually(t, func() bool { return settled() > 0 }, 10*time.Second, 10*time.Millisecond, "settling before the outage")

	proxy.Cut()
	failed := w.Stats().Failures
	rain(1000, 2000)
	require.Eventually(t, func() bool { return w.Stats().Failures >= failed+3 }, 10*time.Second, 5*time.Millisecond,
		"the worker meets the outage and backs off")
	before := settled()
	// The outage lasts well past the reclaim idle time: that is the trap
	// (entries idle at a live worker that cannot write).
	time.Sleep(3 * reclaimIdle)
	require.Equal(t, before, settled(), "nothing was written while the database was unreachable")
	g, err := redisstore.New(r.Client).Group(ctx, c.ID)
	require.NoError(t, err)
	require.Zero(t, g.Dead, "an outage sends nothing to the dead stream")
	require.Positive(t, g.Pending+g.Lag, "grants wait in the stream")

	proxy.Restore()
	rain(2000, 2500)
	_, err = eng.Close(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	n := 0
	granted.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 2500, n, "3000 packets for 2500 users: every grab granted")
	rep, err := settle.Reconcile(ctx, r.Client, direct, c.ID)
	require.NoError(t, err)
	if !rep.OK {
		t.Logf("worker %+v; reconcile: %d differences, ledger %d grants, Redis %d, state %s, unsettled %d, dead %d",
			w.Stats(), rep.DifferenceCount, rep.GrantedLedger, rep.GrantedRedis, rep.State, rep.Unsettled, rep.Dead)
	}
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, n, rep.GrantedLedger, "every grant in the ledger exactly once")
	require.Zero(t, rep.Dead)
	require.Zero(t, rep.EscrowCents)
	require.Equal(t, "settled", rep.State)
	st := w.Stats()
	require.Zero(t, st.Malformed)
	require.Zero(t, st.Conflicts)
	require.EqualValues(t, n, st.Grants+st.Replayed)
}
