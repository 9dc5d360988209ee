package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
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

// TestSettleThroughRestarts: PostgreSQL, a private server, is restarted
// (stopped at once, as a crash, then started) several times while the
// settlement worker writes into it and users keep grabbing. The worker
// backs off while the database is gone; nothing is lost, nothing goes to
// the dead stream, every grant reaches the ledger exactly once and the
// campaign settles with escrow at 0. HONGBAO_LONG_FAULTS=1 makes it
// longer.
func TestSettleThroughRestarts(t *testing.T) {
	t.Parallel()
	testenv.SharedRedis(t) // skips like every Redis test without redis-server
	ctx := context.Background()
	pg, err := pgtest.StartCluster(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no private PostgreSQL to restart: %v", err)
		}
		t.Skipf("no private PostgreSQL to restart: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	l, err := postgres.Open(ctx, pg.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	users, restarts := 3000, 3
	if os.Getenv("HONGBAO_LONG_FAULTS") == "1" {
		users, restarts = 100_000, 10
	}
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: int64(users) * 100, Count: users})
	require.NoError(t, err)
	w, err := settle.New(settle.Config{
		Redis: r.Client, Ledger: l, Consumer: "w", Only: []string{c.ID}, ReadCount: 2,
		Poll: 2 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, ReclaimIdle: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	var granted, unavailable atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := next.Add(1); u <= int64(users); u = next.Add(1) {
				// A grab is retried as a client retries it: one that
				// needed the next block while the ledger was down is
				// answered ErrUnavailable, a full queue ErrBusy (nothing
				// done), a lost reply ErrOutcomeUnknown (the retry answers
				// ALREADY with the packet if it was granted).
				g, err := eng.Grab(ctx, c.ID, "u"+strconv.FormatInt(u, 10))
				for deadline := time.Now().Add(time.Minute); retryable(err) && time.Now().Before(deadline); {
					if errors.Is(err, hongbao.ErrUnavailable) {
						unavailable.Add(1)
					}
					time.Sleep(5 * time.Millisecond)
					g, err = eng.Grab(ctx, c.ID, "u"+strconv.FormatInt(u, 10))
				}
				if err != nil {
					t.Errorf("grab of user %d: %v", u, err)
				} else if g.Outcome == hongbao.Granted || g.Outcome == hongbao.Already {
					granted.Add(1)
				}
				if u%200 == 0 {
					time.Sleep(time.Millisecond) // a rain, not a burst: settlement runs alongside
				}
			}
		}()
	}
	for i := range restarts {
		settledBefore := ledgerGrants(t, l, c.ID)
		require.Eventually(t, func() bool { return ledgerGrants(t, l, c.ID) > settledBefore }, 30*time.Second, 5*time.Millisecond,
			"settling before restart %d", i+1)
		require.NoError(t, pg.Restart(ctx), "restart %d", i+1)
	}
	wg.Wait()
	require.EqualValues(t, users, granted.Load())
	t.Logf("%d grabs answered unavailable while the ledger restarted, then granted on retry", unavailable.Load())
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)

	st := w.Stats()
	t.Logf("%d restarts; worker %+v", restarts, st)
	require.Positive(t, st.Failures, "the restarts were seen")
	require.Zero(t, st.Malformed)
	require.Zero(t, st.Conflicts)
	g, err := redisstore.New(r.Client).Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Dead, "nothing dead-lettered")
	rep, err := settle.Reconcile(ctx, r.Client, "", l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.EqualValues(t, users, rep.GrantedLedger, "every grant in the ledger exactly once")
	require.Equal(t, "settled", rep.State)
	require.Zero(t, rep.EscrowCents)
}

// ledgerGrants reads the campaign's grant count; 0 while the database is
// away (it is safe inside Eventually: no FailNow).
func ledgerGrants(t *testing.T, l *postgres.Ledger, id string) int64 {
	t.Helper()
	tot, err := l.Totals(context.Background(), id)
	if err != nil {
		return 0
	}
	return tot.GrantCount
}

// retryable: the grab did nothing it cannot repeat; a client retries it.
func retryable(err error) bool {
	return errors.Is(err, hongbao.ErrUnavailable) || errors.Is(err, hongbao.ErrBusy) || errors.Is(err, hongbao.ErrOutcomeUnknown)
}
