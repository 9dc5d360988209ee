package settle_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// grabClosed creates a campaign, has users grab one packet each, closes
// it and returns what each user was granted.
func grabClosed(t *testing.T, e *env, users int) (string, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100_000, Count: users + 5})
	require.NoError(t, err)
	got := map[string]int64{}
	for u := range users {
		user := "u" + strconv.Itoa(u)
		g, err := e.eng.Grab(ctx, c.ID, user)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		got[ledger.UserAccount(user)] = g.Cents
	}
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	return c.ID, got
}

func pendingRollUps(t *testing.T, l ledger.Ledger) []string {
	t.Helper()
	ids, err := l.PendingRollUps(context.Background(), 100)
	require.NoError(t, err)
	return ids
}

// requireBalances: every user's Balance is what the user was granted
// (each test's ledger is its own, and a user holds one packet).
func requireBalances(t *testing.T, l ledger.Ledger, want map[string]int64, msg string) {
	t.Helper()
	for acct, cents := range want {
		b, err := l.Balance(context.Background(), acct)
		require.NoError(t, err)
		require.Equal(t, cents, b, "%s: %s", msg, acct)
	}
}

// TestDrainLeavesRollUp: Drain returns once the campaign is refunded and
// settled, without rolling it up; the balances are right from the journal
// meanwhile, and RollUps then rolls it up once.
func TestDrainLeavesRollUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id, want := grabClosed(t, e, 40)
	w := e.worker(t, e.l, "w1", id)
	_, err := w.Drain(ctx)
	require.NoError(t, err)
	st, err := e.eng.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Equal(t, []string{id}, pendingRollUps(t, e.l), "refunded, not rolled up")
	requireBalances(t, e.l, want, "before the roll-up")

	n, err := w.RollUps(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, pendingRollUps(t, e.l))
	requireBalances(t, e.l, want, "after the roll-up")
	n, err = w.RollUps(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to roll up")
	require.EqualValues(t, 1, w.Stats().RolledUp)
	requireBalances(t, e.l, want, "after a second RollUps")
}

// TestStartRollsUpLeftBehind: a process stopped between a campaign's
// refund and its roll-up; a worker started later, on whatever campaigns,
// finds it pending and rolls it up.
func TestStartRollsUpLeftBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id, want := grabClosed(t, e, 20)
	_, err := e.worker(t, e.l, "w1", id).Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{id}, pendingRollUps(t, e.l))

	w := e.worker(t, e.l, "w2", testenv.UniqueID(t)+"-other")
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	require.Eventually(t, func() bool { return w.Stats().RolledUp == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, pendingRollUps(t, e.l))
	requireBalances(t, e.l, want, "rolled up by the later worker")
}

// slowRollUp is a ledger whose roll-ups wait for release: a roll-up of a
// campaign of many users.
type slowRollUp struct {
	ledger.Ledger
	entered chan string
	release chan struct{}
}

func (s slowRollUp) RollUp(ctx context.Context, campaign string) (bool, error) {
	s.entered <- campaign
	select {
	case <-s.release:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return s.Ledger.RollUp(ctx, campaign)
}

// TestRollUpOffThePassesPath: a started worker rolls a refunded campaign
// up in the background, and while that roll-up is slow the grants of
// another campaign still settle.
func TestRollUpOffThePassesPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first, want := grabClosed(t, e, 20)
	c2, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t) + "-2", Total: 10_000, Count: 10})
	require.NoError(t, err)
	slow := slowRollUp{Ledger: e.l, entered: make(chan string, 1), release: make(chan struct{})}
	w := e.worker(t, slow, "w1", first, c2.ID)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	select {
	case got := <-slow.entered:
		require.Equal(t, first, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the refunded campaign was not rolled up")
	}
	g, err := e.eng.Grab(ctx, c2.ID, "late")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	require.Eventually(t, func() bool {
		tot, err := e.l.Totals(ctx, c2.ID)
		return err == nil && tot.GrantCount == 1
	}, 10*time.Second, 5*time.Millisecond, "a grant waited for another campaign's roll-up")
	require.Equal(t, []string{first}, pendingRollUps(t, e.l))

	close(slow.release)
	require.Eventually(t, func() bool { return w.Stats().RolledUp == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, pendingRollUps(t, e.l))
	requireBalances(t, e.l, want, "after the background roll-up")
}

// TestRollUpsWithoutLedger: a Sink that is not a ledger has no roll-up.
func TestRollUpsWithoutLedger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: struct{ settle.Sink }{}, Logger: quiet()})
	require.NoError(t, err)
	n, err := w.RollUps(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestStopDuringRollUp: Stop cancels a roll-up in flight rather than
// wait for it (Stop has no grace), and the campaign stays pending, its
// balances right from the journal, for the next worker to roll up.
func TestStopDuringRollUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id, want := grabClosed(t, e, 20)
	_, err := e.worker(t, e.l, "w1", id).Drain(ctx)
	require.NoError(t, err)
	slow := slowRollUp{Ledger: e.l, entered: make(chan string, 1), release: make(chan struct{})}
	w := e.worker(t, slow, "w2", id)
	require.NoError(t, w.Start(ctx))
	select {
	case <-slow.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the pending campaign was not rolled up")
	}
	w.Stop()
	require.Zero(t, w.Stats().RolledUp)
	require.Equal(t, []string{id}, pendingRollUps(t, e.l), "a roll-up cut short leaves the campaign pending")
	requireBalances(t, e.l, want, "after the roll-up was cut short")

	n, err := e.worker(t, e.l, "w3", id).RollUps(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireBalances(t, e.l, want, "rolled up by the next worker")
}
