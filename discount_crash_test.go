package hongbao_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// Crash tests. A process that reserves, confirms and cancels is killed
// (SIGKILL) at random points, again and again, while the users' home
// shard keeps borrowing from the others, so kills strike between the steps
// of transfers too; and Redis itself is killed and restarted from its AOF
// (appendfsync always) in the middle of a storm. After each, the contents
// must conserve the budget and the quota, every limit must hold, and
// every confirm a client heard of must still be there.

const discountCrashEnv = "HONGBAO_DISCOUNT_CRASH_CHILD"

// TestDiscountCrashKill kills a child process at random points of its
// work on a four-shard campaign and audits the campaign after every kill,
// before any recovery: what a kill leaves (transfer records in flight,
// reservations never confirmed) is accounted for as it is.
func TestDiscountCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	t.Parallel()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 300_000, Quota: 3000, Min: 1, Max: 300,
		PerUserCount: 4, PerUserAmount: 700, Shards: 4, Hold: time.Second, Seed: seed(7)})
	logPath := filepath.Join(t.TempDir(), "told.log")
	rnd := rand.New(rand.NewPCG(1, 2))
	store := redisstore.New(r.Client)
	borrowed := func() int64 { // units moved to any shard by transfers
		v, err := store.ReadDiscount(context.Background(), d.ID)
		require.NoError(t, err)
		var moved int64
		for _, sn := range v.Snaps {
			moved += sn.Int("in_count")
		}
		return moved
	}
	// Eight kills at least; on a slow machine more rounds (up to 32), until
	// some shard has borrowed from the others, so that kills can strike
	// transfers.
	kills := 0
	for round := 0; round < 8 || (round < 32 && borrowed() == 0); round++ {
		runCrashChild(t, "TestDiscountCrashChild",
			discountCrashEnv+"="+strings.Join([]string{r.Addr, d.ID, strconv.Itoa(round), logPath}, ","), 50+rnd.IntN(400))
		kills++
		requireAudit(t, eng, d.ID) // transfers a kill left in flight included
	}
	require.GreaterOrEqual(t, kills, 8)

	// What the settlement worker does for a dead process: finish its
	// transfers. Then every hold ends.
	_, err = store.Recover(context.Background(), redisstore.ShardViews(redisstore.Default.DiscountLayout(d.ID, 4)), 0)
	require.NoError(t, err)
	st := drainHolds(t, eng, d.ID)
	requireAudit(t, eng, d.ID)
	confirmed := checkToldConfirms(t, eng, d.ID, logPath)
	require.Positive(t, confirmed, "the children confirmed discounts between kills")
	require.GreaterOrEqual(t, st.ConfirmedCount, int64(confirmed))
	moved := borrowed()
	require.Positive(t, moved, "shard 1 borrowed from the others")
	t.Logf("%d kills; %d confirms heard of, %d in Redis (a kill may come between a confirm and its log line); %d units moved between shards",
		kills, confirmed, st.ConfirmedCount, moved)
}

// TestDiscountCrashChild is the child of TestDiscountCrashKill: it plays
// users paying until it is killed, and appends every confirm it hears of
// to the log ("C <user> <order> <cents>").
func TestDiscountCrashChild(t *testing.T) {
	arg := os.Getenv(discountCrashEnv)
	if arg == "" {
		t.Skip("run by TestDiscountCrashKill")
	}
	parts := strings.Split(arg, ",")
	require.Len(t, parts, 4)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{parts[0]}, DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	eng, err := hongbao.New(hongbao.Config{Redis: c})
	require.NoError(t, err)
	f, err := os.OpenFile(parts[3], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	defer f.Close()
	round, _ := strconv.Atoi(parts[2])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	// All users live on shard 1: it keeps running dry and borrowing.
	us := usersHomedOn("k"+strconv.Itoa(round)+"-", 400, 4, 1)
	var working sync.Once // the parent times its kill from this line
	for w := range 16 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			// Until killed: once its users are done, a worker goes over
			// them again (repeats, which must answer as before).
			for ctx.Err() == nil {
				for i := w; i < len(us) && ctx.Err() == nil; i += 16 {
					childUser(ctx, eng, parts[1], us[i], rnd, func(line string) {
						mu.Lock()
						defer mu.Unlock()
						_, _ = f.WriteString(line)
					})
					working.Do(func() { fmt.Println("working") })
				}
			}
		})
	}
	wg.Wait()
}

// childUser reserves three orders for user and confirms, cancels or
// abandons each.
func childUser(ctx context.Context, eng *hongbao.Engine, id, user string, rnd *rand.Rand, logLine func(string)) {
	for o := range 3 {
		order := "o" + strconv.Itoa(o)
		r, err := retry(ctx, func() (hongbao.Reservation, error) {
			return eng.Discounts().Reserve(ctx, id, user, order, 1+rnd.Int64N(400))
		})
		if err != nil || r.Outcome != hongbao.Reserved {
			continue
		}
		switch p := rnd.IntN(10); {
		case p < 6:
			c, err := retry(ctx, func() (hongbao.Reservation, error) { return eng.Discounts().Confirm(ctx, id, user, order) })
			if err == nil {
				logLine(fmt.Sprintf("C %s %s %d\n", user, order, c.Cents))
			}
		case p < 8:
			_, _ = retry(ctx, func() (hongbao.Reservation, error) { return eng.Discounts().Cancel(ctx, id, user, order) })
		}
	}
}

// checkToldConfirms requires every confirm in the log at path to be
// confirmed in Redis with its amount, and returns how many there were.
func checkToldConfirms(t *testing.T, eng *hongbao.Engine, id, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var user, order string
		var cents int64
		if _, err := fmt.Sscanf(sc.Text(), "C %s %s %d", &user, &order, &cents); err != nil {
			continue // a line cut by a kill
		}
		c, err := eng.Discounts().Confirm(context.Background(), id, user, order)
		require.NoError(t, err, "%s %s", user, order)
		require.True(t, c.Again, "%s %s was confirmed before", user, order)
		require.Equal(t, cents, c.Cents, "%s %s", user, order)
		n++
	}
	require.NoError(t, sc.Err())
	return n
}

// TestDiscountRedisCrash kills Redis (appendfsync always) in the middle of
// a storm on two shards and restarts it from its data directory: every
// confirm acknowledged before the crash is still there, the storm goes on
// (its calls answer outcome unknown during the outage and are retried),
// and the audit finds every cent.
func TestDiscountRedisCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a redis-server")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: dir, AOF: "always"})
	if errors.Is(err, redisserver.ErrNotInstalled) {
		t.Skip("redis-server is not installed")
	}
	require.NoError(t, err)
	port, _ := strconv.Atoi(srv.Addr[strings.LastIndexByte(srv.Addr, ':')+1:])
	var mu sync.Mutex
	t.Cleanup(func() { mu.Lock(); _ = srv.Stop(); mu.Unlock() })
	c := testenv.Client(t, srv.Addr)
	eng, err := hongbao.New(hongbao.Config{Redis: c})
	require.NoError(t, err)
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 200_000, Quota: 2000, Min: 1, Max: 200,
		PerUserCount: 3, Shards: 2, Hold: 3 * time.Second, Seed: seed(8)})
	// A hold outlives the restart: a reservation made before the kill is
	// confirmed after it, even on a loaded machine where the restart
	// (loading the AOF) takes over a second.

	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		// Into the storm: once some discounts are confirmed.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			st, err := eng.Discounts().Status(ctx, d.ID)
			if err == nil && st.ConfirmedCount >= 100 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		srv.Kill()
		srv, err = redisserver.Start(ctx, redisserver.Options{Dir: dir, AOF: "always", Port: port})
	}()
	log := storm(t, eng, d, stormConfig{users: users("rc-", 600), ordersPerUser: 3, cancelPct: 20, abandonPct: 10,
		maxOrder: 300, workers: 16, seed: 8})
	<-crashed
	require.NoError(t, err, "restart")
	st := checkStorm(t, eng, d, log)
	t.Logf("Redis killed and restarted in the storm: %d calls retried after lost replies (in all tests so far); %d confirmed",
		retried.Load(), st.ConfirmedCount)
}
