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
	e := newOutageEnv(t)

	e.rain(0, 1000)
	require.Eventually(t, func() bool { return e.settled() > 0 }, 10*time.Second, 10*time.Millisecond, "settling before the outage")

	e.proxy.Cut()
	failed := e.w.Stats().Failures
	e.rain(1000, 2000)
	require.Eventually(t, func() bool { return e.w.Stats().Failures >= failed+3 }, 10*time.Second, 5*time.Millisecond,
		"the worker meets the outage and backs off")
	before := e.settled()
	// The outage lasts well past the reclaim idle time: that is the trap
	// (entries idle at a live worker that cannot write).
	time.Sleep(3 * reclaimIdle)
	require.Equal(t, before, e.settled(), "nothing was written while the database was unreachable")
	g, err := redisstore.New(e.r.Client).Group(e.ctx, redisstore.Default.CampaignKeys(e.c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Dead, "an outage sends nothing to the dead stream")
	require.Positive(t, g.Pending+g.Lag, "grants wait in the stream")

	e.proxy.Restore()
	e.rain(2000, 2500)
	_, err = e.eng.CloseCampaign(e.ctx, e.c.ID)
	require.NoError(t, err)
	e.w.Stop()
	_, err = e.w.Drain(e.ctx)
	require.NoError(t, err)
	e.requireSettled(t)
}

// reclaimIdle is the worker's reclaim idle time in the outage test.
const reclaimIdle = 200 * time.Millisecond

// outageEnv is a campaign in a real Redis whose worker writes to
// PostgreSQL through a proxy that can be cut, and a direct ledger
// connection to read what reached the database.
type outageEnv struct {
	t       *testing.T
	ctx     context.Context
	proxy   *testenv.Proxy
	direct  *postgres.Ledger
	r       *testenv.Redis
	eng     *hongbao.Engine
	c       *hongbao.Campaign
	w       *settle.Worker
	granted sync.Map // user -> cents
}

func newOutageEnv(t *testing.T) *outageEnv {
	t.Helper()
	e := &outageEnv{t: t, ctx: context.Background()}
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	e.proxy = testenv.NewProxy(t, u.Host)
	u.Host = e.proxy.Addr
	viaProxy, err := postgres.Open(e.ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = viaProxy.Close() })
	e.direct, err = postgres.Open(e.ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.direct.Close() })

	e.r = testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	e.eng, err = hongbao.New(hongbao.Config{Redis: e.r.Client})
	require.NoError(t, err)
	e.c, err = e.eng.Create(e.ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 3000})
	require.NoError(t, err)
	e.w, err = settle.New(settle.Config{
		Redis: e.r.Client, Ledger: viaProxy, Consumer: "w1", Only: []string{e.c.ID},
		ReclaimIdle: reclaimIdle, Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, e.w.Start(e.ctx))
	t.Cleanup(e.w.Stop)
	return e
}

// rain has users u<from>..u<to-1> grab at once and records the grants.
func (e *outageEnv) rain(from, to int) {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := "u" + strconv.Itoa(i)
			g, err := e.eng.Grab(e.ctx, e.c.ID, user)
			if err == nil && g.Outcome == hongbao.Granted {
				e.granted.Store(user, g.Cents)
			}
		}()
	}
	wg.Wait()
}

// settled returns the grants in the ledger, read directly; it is safe
// inside Eventually (no FailNow).
func (e *outageEnv) settled() int64 {
	tot, err := e.direct.Totals(e.ctx, e.c.ID)
	if err != nil {
		e.t.Errorf("read the ledger directly: %v", err)
		return -1
	}
	return tot.GrantCount
}

// requireSettled checks that every grab was granted, every grant reached
// the ledger exactly once and the campaign settled with escrow at 0.
func (e *outageEnv) requireSettled(t *testing.T) {
	t.Helper()
	n := 0
	e.granted.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 2500, n, "3000 packets for 2500 users: every grab granted")
	rep, err := settle.Reconcile(e.ctx, e.r.Client, "", e.direct, e.c.ID)
	require.NoError(t, err)
	if !rep.OK {
		t.Logf("worker %+v; reconcile: %d differences, ledger %d grants, Redis %d, state %s, unsettled %d, dead %d",
			e.w.Stats(), rep.DifferenceCount, rep.GrantedLedger, rep.GrantedRedis, rep.State, rep.Unsettled, rep.Dead)
	}
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, n, rep.GrantedLedger, "every grant in the ledger exactly once")
	require.Zero(t, rep.Dead)
	require.Zero(t, rep.EscrowCents)
	require.Equal(t, "settled", rep.State)
	st := e.w.Stats()
	require.Zero(t, st.Malformed)
	require.Zero(t, st.Conflicts)
	require.EqualValues(t, n, st.Grants+st.Replayed)
}
