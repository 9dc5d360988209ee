package settle_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

// TestCrashRestart SIGKILLs a settle worker process in the middle of its
// batches, again and again, over a 100,000-grant campaign, and proves every
// grant reaches the ledger exactly once and escrow ends at 0 after the
// refund.
func TestCrashRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a 100,000-grant campaign")
	}
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "hongbao")
	build := exec.Command("go", "build", "-o", bin, "../cmd/hongbao")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	const packets = 100_000
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10 * packets, Count: packets})
	require.NoError(t, err)
	// Grab in batches straight through the store: the test is about
	// settlement, and a 100,000-goroutine rain under -race is slow.
	store := redisstore.New(e.redis.Client)
	users := make([]string, 500)
	out := make([]redisstore.GrabResult, len(users))
	for b := 0; b < packets/len(users); b++ {
		for i := range users {
			users[i] = "u" + strconv.Itoa(b*len(users)+i)
		}
		require.NoError(t, store.Grab(ctx, redisstore.GrabKeys(redisstore.Default.CampaignKeys(c.ID)), 1, users, out))
	}
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)

	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	kills, midRun := 0, 0
	var settled int64 // grants in the ledger after the last kill
	// Twelve kills, each later in the run than the one before; on a slow
	// machine, where a worker may not have written anything by then, more
	// (up to 40, later still) until one has struck mid-run.
	for round := 0; round < 12 || (round < 40 && midRun == 0); round++ {
		cmd := exec.Command(bin, "settle", "--redis", e.redis.Addr, "--ledger", dsn, "--consumer", "crashy", "--drain")
		cmd.Env = append(os.Environ(), "HONGBAO_CAMPAIGNS="+c.ID)
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "a drain that was not killed ends cleanly")
			round = 99
		case <-time.After(killAfter(round)):
			require.NoError(t, cmd.Process.Kill())
			<-done
			kills++
			// What the killed worker left behind: never less than before,
			// and a kill that left some but not all grants written struck
			// in the middle of the run.
			n := ledgerGrants(t, dsn, c.ID)
			require.GreaterOrEqual(t, n, settled, "a kill never undoes a commit")
			if n > 0 && n < packets {
				midRun++
			}
			settled = n
		}
	}
	require.Positive(t, kills, "the worker was killed at least once")
	require.Positive(t, midRun, "at least one kill struck with the campaign partly settled")

	// The last run is not killed: it drains. The heavy work stays in the
	// binary (the test binary runs under -race, where SQLite is slow).
	drain := exec.Command(bin, "settle", "--redis", e.redis.Addr, "--ledger", dsn, "--consumer", "crashy", "--drain", "--campaigns", c.ID)
	drain.Stderr = os.Stderr
	require.NoError(t, drain.Run())
	recOut, err := exec.Command(bin, "reconcile", "--redis", e.redis.Addr, "--ledger", dsn, "--campaign", c.ID, "--json").Output()
	require.NoError(t, err, "reconcile: %s", recOut)
	var rep settle.Report
	require.NoError(t, json.Unmarshal(recOut, &rep))
	require.True(t, rep.OK, "after %d kills: %v", kills, rep.Differences)
	require.EqualValues(t, packets, rep.GrantedLedger)
	require.EqualValues(t, 10*packets, rep.GrantedCentsLedger)
	require.Zero(t, rep.EscrowCents)
	require.Equal(t, "settled", rep.State)
	t.Logf("%d kills (%d with the campaign partly settled), then a clean drain: %d grants settled exactly once",
		kills, midRun, rep.GrantedLedger)
}

// killAfter is how long round's worker runs before it is killed: 80 ms,
// 15 ms more each round, and from the twelfth on 100 ms more each round.
func killAfter(round int) time.Duration {
	ms := 80 + 15*min(round, 11)
	if round > 11 {
		ms += 100 * (round - 11)
	}
	return time.Duration(ms) * time.Millisecond
}

// ledgerGrants opens the ledger at dsn, reads how many grants of campaign
// it holds, and closes it again.
func ledgerGrants(t *testing.T, dsn, campaign string) int64 {
	t.Helper()
	l, err := open.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer l.Close()
	tot, err := l.Totals(context.Background(), campaign)
	require.NoError(t, err)
	return tot.GrantCount
}
