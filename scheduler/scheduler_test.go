package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture is what an embedder has: a private redis-server, a SQLite
// ledger and an engine.
type fixture struct {
	redis *testenv.Redis
	led   ledger.Ledger
	eng   *hongbao.Engine
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	led, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led})
	require.NoError(t, err)
	return &fixture{redis: r, led: led, eng: eng}
}

func (f *fixture) start(t *testing.T, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	cfg.Settle.Redis, cfg.Settle.Ledger, cfg.Settle.Consumer = f.redis.Client, f.led, "test"
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s, err := scheduler.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return s
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSchedulerSettlesAndReaps: an embedder's Scheduler, given only its
// engine and ledger, settles a rain (every grant, then the refund once
// closed) and reaps a discount reservation whose hold passed.
func TestSchedulerSettlesAndReaps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	s := f.start(t, scheduler.Config{Engine: f.eng, LeaseTTL: time.Second, ReapEvery: 50 * time.Millisecond})
	waitFor(t, "the lease", 5*time.Second, s.IsLeader)

	c, err := f.eng.Create(ctx, hongbao.Spec{Total: 1000, Count: 10})
	require.NoError(t, err)
	var granted int64
	for i := range 6 {
		g, err := f.eng.Grab(ctx, c.ID, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		granted += g.Cents
	}
	_, err = f.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	// The ledger records the refund before Redis does (settle.lua): wait
	// for both, or the reconcile may read Redis between the two.
	waitFor(t, "the rain settled and refunded", 10*time.Second, func() bool {
		tot, err := f.led.Totals(ctx, c.ID)
		st, serr := f.eng.Status(ctx, c.ID)
		return err == nil && serr == nil && tot.GrantCents == granted && tot.Refunded == 1000-granted &&
			st.State == hongbao.StateSettled
	})
	rep, err := settle.Reconcile(ctx, f.redis.Client, "", f.led, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)

	d, err := f.eng.Discounts().Create(ctx, hongbao.DiscountSpec{Budget: 500, Quota: 5, Max: 100, Hold: hongbao.MinHold})
	require.NoError(t, err)
	r, err := f.eng.Discounts().Reserve(ctx, d.ID, "buyer", "order-1", 10000)
	require.NoError(t, err)
	require.True(t, r.Outcome.HasAmount())
	waitFor(t, "the reaper to expire the reservation", 10*time.Second, func() bool {
		st, err := f.eng.Discounts().Status(ctx, d.ID)
		require.NoError(t, err)
		return st.ReservedCount == 0 && st.RemainingCents == 500
	})
}

// TestSettleProcessReaps: in the split topology (an API process with the
// engine and no scheduler, a settle process with the scheduler and no
// engine), the scheduler still expires a discount reservation whose hold
// passed, while the campaign is open: an abandoned payment gives its unit
// and the user's allowance back within the hold, not at the close.
func TestSettleProcessReaps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	s := f.start(t, scheduler.Config{LeaseTTL: time.Second, ReapEvery: 50 * time.Millisecond}) // no Engine: hongbao settle
	waitFor(t, "the lease", 5*time.Second, s.IsLeader)
	d, err := f.eng.Discounts().Create(ctx, hongbao.DiscountSpec{Budget: 500, Quota: 5, Max: 100, PerUserCount: 1, Hold: hongbao.MinHold})
	require.NoError(t, err)
	r, err := f.eng.Discounts().Reserve(ctx, d.ID, "buyer", "order-1", 10000)
	require.NoError(t, err)
	require.True(t, r.Outcome.HasAmount())
	r, err = f.eng.Discounts().Reserve(ctx, d.ID, "buyer", "order-2", 10000)
	require.NoError(t, err)
	require.Equal(t, hongbao.OverLimit, r.Outcome, "one discount per user while the first is held")
	waitFor(t, "the settle process to expire the reservation", 10*time.Second, func() bool {
		st, err := f.eng.Discounts().Status(ctx, d.ID)
		require.NoError(t, err)
		return st.ReservedCount == 0 && st.RemainingCents == 500 && s.Worker().Stats().Reaped > 0
	})
	r, err = f.eng.Discounts().Reserve(ctx, d.ID, "buyer", "order-3", 10000)
	require.NoError(t, err)
	require.True(t, r.Outcome.HasAmount(), "the user's allowance came back with the expiry: %v", r.Outcome)
}

// TestSchedulerBoundsBacklog: with MaxBacklog set, a campaign whose
// unsettled grant batches pass the bound answers grabs ErrBusy, read from
// the backlog (not per grab), and grants again once settlement catches up.
func TestSchedulerBoundsBacklog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	c, err := f.eng.Create(ctx, hongbao.Spec{Total: 10000, Count: 100})
	require.NoError(t, err)
	// This scheduler settles only another campaign, so c's backlog grows;
	// the bound reads every campaign's.
	f.start(t, scheduler.Config{Engine: f.eng, MaxBacklog: 3, BacklogEvery: 10 * time.Millisecond,
		Settle: settle.Config{Only: []string{"elsewhere"}}})
	user := 0
	grab := func() error {
		user++
		_, err := f.eng.Grab(ctx, c.ID, fmt.Sprintf("u%d", user))
		return err
	}
	for range 4 { // one batch each, sequential: 4 entries > 3
		require.NoError(t, grab())
	}
	waitFor(t, "grabs to answer busy", 5*time.Second, func() bool {
		err := grab()
		if err != nil {
			require.ErrorIs(t, err, hongbao.ErrBusy)
		}
		return err != nil
	})
	b, err := settle.ReadBacklog(ctx, f.redis.Client, "", c.ID)
	require.NoError(t, err)
	require.Greater(t, b.Unsettled(), int64(3))

	w, err := settle.New(settle.Config{Redis: f.redis.Client, Ledger: f.led, Consumer: "catch-up", Logger: quiet()})
	require.NoError(t, err)
	_, err = w.Pass(ctx)
	require.NoError(t, err)
	waitFor(t, "grabs to be granted again", 5*time.Second, func() bool { return grab() == nil })
}

// TestSchedulerNoBoundByDefault: without MaxBacklog no backlog is read and
// grabs are never refused for it.
func TestSchedulerNoBoundByDefault(t *testing.T) {
	t.Parallel()
	require.Error(t, scheduler.Config{MaxBacklog: 1}.Validate(), "a bound needs Redis and an engine")
	f := newFixture(t)
	ctx := t.Context()
	c, err := f.eng.Create(ctx, hongbao.Spec{Total: 10000, Count: 100})
	require.NoError(t, err)
	f.start(t, scheduler.Config{Engine: f.eng, Settle: settle.Config{Only: []string{"elsewhere"}}})
	for i := range 20 {
		_, err := f.eng.Grab(ctx, c.ID, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
}
