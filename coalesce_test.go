package hongbao

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/split"
)

// pausedEngine gives an engine on a private Redis, and a way to hold its
// writes: CLIENT PAUSE WRITE keeps a batch in flight for as long as a test
// needs to arrange the queue behind it.
func pausedEngine(t *testing.T, cfg Config) (*Engine, func(ms int64), *Campaign) {
	t.Helper()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	cfg.Redis = r.Client
	e, err := New(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	c, err := e.Create(ctx, Spec{Total: 100000, Count: 1000})
	require.NoError(t, err)
	// Load grab.lua, so paused calls are the EVALSHA that runs it.
	_, err = e.Grab(ctx, c.ID, "warm-up")
	require.NoError(t, err)
	admin := testenv.Client(t, r.Addr)
	pause := func(ms int64) {
		require.NoError(t, admin.Do(ctx, admin.B().ClientPause().Timeout(ms).Write().Build()).Error())
	}
	return e, pause, c
}

// waitQueue waits until campaign id has a batch in flight and n grabs
// queued behind it.
func waitQueue(t *testing.T, e *Engine, id string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		e.co.mu.Lock()
		defer e.co.mu.Unlock()
		l := e.co.lanes[laneKey{id: id, shards: 1}]
		if l == nil {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.inflight && len(l.queue) == n
	}, 5*time.Second, time.Millisecond)
}

func TestCoalescedResultsReachTheirCallers(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	e, err := New(Config{Redis: r.Client, MaxBatch: 64})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := e.Create(ctx, Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 2000})
	require.NoError(t, err)

	const users, clicks = 3000, 2
	got := make([][clicks]Grant, users)
	var wg sync.WaitGroup
	for u := 0; u < users; u++ {
		for k := 0; k < clicks; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, err := e.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
				assert.NoError(t, err)
				got[u][k] = g
			}()
		}
	}
	wg.Wait()

	// Every caller got the answer for its own user: the packet it was told
	// is the one the claims hash holds for that user.
	claims := map[string][2]int64{}
	require.NoError(t, e.store.ScanClaims(ctx, redisstore.Default.CampaignKeys(c.ID), func(u string, seq, cents int64) error {
		claims[u] = [2]int64{seq, cents}
		return nil
	}))
	require.Len(t, claims, 2000)
	granted := 0
	for u := range got {
		name := "u" + strconv.Itoa(u)
		for _, g := range got[u] {
			require.Equal(t, name, g.User)
			if g.Outcome == Granted {
				granted++
			}
			if g.Outcome.HasPacket() {
				require.Equal(t, claims[name], [2]int64{g.Seq, g.Cents}, "user %s", name)
			} else {
				require.Equal(t, SoldOut, g.Outcome)
				require.NotContains(t, claims, name)
			}
		}
	}
	require.Equal(t, 2000, granted)
	st := e.Stats()
	require.EqualValues(t, users*clicks, st.Grabs)
	require.Less(t, st.Batches, st.Grabs, "concurrent grabs share batches")
	a, err := e.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
}

func TestCoalescingQueuesBehindTheBatchInFlight(t *testing.T) {
	t.Parallel()
	e, pause, c := pausedEngine(t, Config{MaxBatch: 100})
	ctx := context.Background()
	pause(400)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, err := e.Grab(ctx, c.ID, "first"); assert.NoError(t, err) }()
	waitQueue(t, e, c.ID, 0)
	for i := 0; i < 150; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := e.Grab(ctx, c.ID, "u"+strconv.Itoa(i)); assert.NoError(t, err) }()
	}
	waitQueue(t, e, c.ID, 150)
	wg.Wait()
	// warm-up, first, then 150 queued: one batch of 100 and one of 50.
	st := e.Stats()
	require.EqualValues(t, 4, st.Batches)
	require.EqualValues(t, 152, st.Grabs)
	require.EqualValues(t, 2, st.BatchSizes[0].Count) // batches of 1
	require.EqualValues(t, 1, st.BatchSizes[6].Count) // 33..64: the 50
	require.EqualValues(t, 1, st.BatchSizes[7].Count) // 65..128: the 100
}

func TestCancelledCaller(t *testing.T) {
	t.Parallel()
	e, pause, c := pausedEngine(t, Config{})
	ctx := context.Background()
	pause(500)

	// alice's grab is in flight when her context ends: unknown outcome.
	aliceCtx, cancelAlice := context.WithCancel(ctx)
	aliceErr := make(chan error, 1)
	go func() { _, err := e.Grab(aliceCtx, c.ID, "alice"); aliceErr <- err }()
	waitQueue(t, e, c.ID, 0)

	// bob's grab is queued behind it when his ends: never sent.
	bobCtx, cancelBob := context.WithCancel(ctx)
	bobErr := make(chan error, 1)
	go func() { _, err := e.Grab(bobCtx, c.ID, "bob"); bobErr <- err }()
	waitQueue(t, e, c.ID, 1)

	cancelAlice()
	cancelBob()
	err := <-aliceErr
	require.ErrorIs(t, err, ErrOutcomeUnknown)
	require.ErrorIs(t, err, context.Canceled)
	err = <-bobErr
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, ErrOutcomeUnknown), "a grab never sent has a known outcome: nothing")

	// When Redis resumes, alice's batch runs: her packet is hers, and her
	// retry returns it. Bob was never granted anything.
	var g Grant
	require.Eventually(t, func() bool {
		g, err = e.Grab(ctx, c.ID, "alice")
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, Already, g.Outcome)
	g, err = e.Grab(ctx, c.ID, "bob")
	require.NoError(t, err)
	require.Equal(t, Granted, g.Outcome)
	a, err := e.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 3, a.StreamCount) // warm-up, alice, bob
}

func TestBusyWhenQueueFull(t *testing.T) {
	t.Parallel()
	e, pause, c := pausedEngine(t, Config{MaxQueue: 5})
	ctx := context.Background()
	pause(400)
	var wg sync.WaitGroup
	results := make([]Grant, 6)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		results[0], err = e.Grab(ctx, c.ID, "u0")
		assert.NoError(t, err)
	}()
	waitQueue(t, e, c.ID, 0)
	for i := 1; i <= 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			results[i], err = e.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
			assert.NoError(t, err)
		}()
	}
	waitQueue(t, e, c.ID, 5)
	_, err := e.Grab(ctx, c.ID, "one-too-many")
	require.ErrorIs(t, err, ErrBusy)
	wg.Wait()
	for i, g := range results {
		require.Equal(t, Granted, g.Outcome, "queued grab %d", i)
	}
	// The refused grab was never attempted: it can grab now.
	g, err := e.Grab(ctx, c.ID, "one-too-many")
	require.NoError(t, err)
	require.Equal(t, Granted, g.Outcome)
	a, err := e.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 8, a.StreamCount)
}

// TestManyCampaignsAtOnce: lanes are per campaign and independent.
func TestManyCampaignsAtOnce(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	e, err := New(Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	ids := make([]string, 8)
	for i := range ids {
		c, err := e.Create(ctx, Spec{ID: testenv.UniqueID(t) + strconv.Itoa(i), Total: 5000, Count: 50, Split: split.LineCut})
		require.NoError(t, err)
		ids[i] = c.ID
	}
	var wg sync.WaitGroup
	for i := 0; i < 800; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Grab(ctx, ids[i%len(ids)], "u"+strconv.Itoa(i/len(ids)))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		a, err := e.Audit(ctx, id)
		require.NoError(t, err)
		require.True(t, a.OK(), "audit %s: %v", id, a.Problems)
		require.EqualValues(t, 50, a.StreamCount)
	}
	require.Eventually(t, func() bool {
		e.co.mu.Lock()
		defer e.co.mu.Unlock()
		return len(e.co.lanes) == 0
	}, 5*time.Second, time.Millisecond, "idle lanes are retired")
}
