package leader_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// exampleClient is the client the runnable examples use: examples take no
// *testing.T, so runTests connects it to the shared test server.
var exampleClient rueidis.Client

func runTests(m *testing.M) int {
	if !redisserver.Available("") {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "redis-server is not installed; CI must have it")
			return 1
		}
		// Every test and example here needs Redis; the tests would skip,
		// the examples cannot.
		fmt.Fprintln(os.Stderr, "skipping leader: redis-server is not installed")
		return 0
	}
	srv, err := testenv.SharedServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the shared redis-server:", err)
		return 1
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect to the shared redis-server:", err)
		return 1
	}
	exampleClient = c
	return testenv.Main(m, c.Close)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// eventually polls cond until it holds, failing the test at the deadline.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// watch records the terms of several electors and fails the test when two
// of them run their work at once.
type watch struct {
	t       *testing.T
	mu      sync.Mutex
	running string // the elector whose work runs, "" for none
	terms   []record
}

// record is one term of one elector: its token, when its work started and
// when it saw its context end.
type record struct {
	who        string
	token      int64
	start, end time.Time
}

func newWatch(t *testing.T) *watch { return &watch{t: t} }

// onElected is the OnElected of elector who.
func (w *watch) onElected(who string) func(context.Context, leader.Term) {
	return func(ctx context.Context, term leader.Term) {
		w.mu.Lock()
		if w.running != "" {
			w.t.Errorf("%s elected while %s still runs its work", who, w.running)
		}
		w.running = who
		i := len(w.terms)
		w.terms = append(w.terms, record{who: who, token: term.Token, start: time.Now()})
		w.mu.Unlock()
		<-ctx.Done()
		w.mu.Lock()
		w.terms[i].end = time.Now()
		w.running = ""
		w.mu.Unlock()
	}
}

// last returns the latest term, and whether there is one.
func (w *watch) last() (record, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.terms) == 0 {
		return record{}, false
	}
	return w.terms[len(w.terms)-1], true
}

// at returns term i.
func (w *watch) at(i int) record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terms[i]
}

func (w *watch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.terms)
}

func start(t *testing.T, cfg leader.Config) *leader.Elector {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	e, err := leader.New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(e.Stop)
	return e
}

// markKey is the key that holds the lease of name, as the package
// documents it.
func markKey(name string) string { return leader.DefaultPrefix + "{" + name + "}:mark" }

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	tests := []struct {
		name string
		cfg  leader.Config
		ok   bool
	}{
		{"defaults", leader.Config{Redis: c}, true},
		{"no redis", leader.Config{}, false},
		{"braces in the name", leader.Config{Redis: c, Name: "a{b}"}, false},
		{"braces in the prefix", leader.Config{Redis: c, Prefix: "x{"}, false},
		{"short ttl", leader.Config{Redis: c, TTL: 10 * time.Millisecond}, false},
		{"ttl not in whole ms", leader.Config{Redis: c, TTL: time.Second + time.Microsecond}, false},
		{"renewal longer than half the ttl", leader.Config{Redis: c, TTL: time.Second, RenewEvery: 600 * time.Millisecond}, false},
		{"renewal at half the ttl", leader.Config{Redis: c, TTL: time.Second, RenewEvery: 500 * time.Millisecond}, true},
		{"negative renewal", leader.Config{Redis: c, RenewEvery: -time.Second}, false},
		{"long id", leader.Config{Redis: c, ID: strings.Repeat("x", leader.MaxIDLen+1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, nerr := leader.New(tt.cfg)
			if tt.ok {
				require.NoError(t, err)
				require.NoError(t, nerr)
				return
			}
			require.ErrorIs(t, err, leader.ErrConfig)
			require.ErrorIs(t, nerr, leader.ErrConfig)
		})
	}
}

// TestTwoHolders: of two electors, exactly one holds the lease; when it
// stops it releases the lease, and the other takes over at its next try,
// long before the TTL, with a larger fencing token.
func TestTwoHolders(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	name := testenv.UniqueID(t)
	w := newWatch(t)
	cfg := func(who string) leader.Config {
		return leader.Config{Redis: c, Name: name, TTL: time.Minute, RenewEvery: 20 * time.Millisecond, OnElected: w.onElected(who)}
	}
	a, b := start(t, cfg("a")), start(t, cfg("b"))
	eventually(t, 5*time.Second, "nobody elected", func() bool { return w.count() == 1 })
	first, _ := w.last()
	require.Positive(t, first.token)
	holder, other := a, b
	if first.who == "b" {
		holder, other = b, a
	}
	require.True(t, holder.IsLeader())
	require.False(t, other.IsLeader())
	require.Equal(t, 1, w.count())

	stopped := time.Now()
	holder.Stop()
	require.False(t, holder.IsLeader())
	// The first term's, not the last: the other may already be elected.
	require.False(t, w.at(0).end.IsZero(), "the work of the stopped holder ended")
	eventually(t, 5*time.Second, "the other did not take over", func() bool { return w.count() == 2 })
	second, _ := w.last()
	require.NotEqual(t, first.who, second.who)
	require.Less(t, second.start.Sub(stopped), 10*time.Second, "taken over at a try, not after the TTL")
	require.Greater(t, second.token, first.token, "fencing tokens grow")
	require.True(t, other.IsLeader())

	other.Stop()
	n, err := c.Do(context.Background(), c.B().Exists().Key(markKey(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "a stopped holder releases the lease")
}

// TestKilledHolder: a holder cut off from Redis neither renews nor
// releases; it reports the loss on its own, and another elector takes over
// only once the lease has run out in Redis.
func TestKilledHolder(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	name := testenv.UniqueID(t)
	const ttl = 600 * time.Millisecond
	w := newWatch(t)
	a := start(t, leader.Config{Redis: testenv.Client(t, proxy.Addr), Name: name, TTL: ttl, RenewEvery: 50 * time.Millisecond, OnElected: w.onElected("a")})
	eventually(t, 5*time.Second, "a not elected", a.IsLeader)
	start(t, leader.Config{Redis: r.Client, Name: name, TTL: ttl, RenewEvery: 50 * time.Millisecond, OnElected: w.onElected("b")})

	proxy.Cut()
	// Read after the cut, the mark's time to live bounds when Redis can
	// let anyone else have the lease.
	asked := time.Now()
	pttl, err := r.Client.Do(context.Background(), r.Client.B().Pttl().Key(markKey(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, pttl)
	expires := asked.Add(time.Duration(pttl) * time.Millisecond)

	eventually(t, 10*time.Second, "b did not take over", func() bool { return w.count() == 2 })
	require.False(t, a.IsLeader())
	terms := func() []record { w.mu.Lock(); defer w.mu.Unlock(); return append([]record(nil), w.terms...) }()
	require.Equal(t, "a", terms[0].who)
	require.Equal(t, "b", terms[1].who)
	require.False(t, terms[0].end.IsZero())
	require.True(t, terms[0].end.Before(terms[1].start), "a reported the loss before b took over")
	require.False(t, terms[1].start.Before(expires), "b took over only once the lease ran out in Redis")
	require.Greater(t, terms[1].token, terms[0].token)
}

// TestStalledRenewal: while Redis stalls (paused for writes, so renewals
// hang instead of failing), the holder reports the loss before the lease
// can run out in Redis; once Redis answers again, nobody else having held
// the lease, it takes it back with the same token.
func TestStalledRenewal(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	name := testenv.UniqueID(t)
	w := newWatch(t)
	a := start(t, leader.Config{Redis: r.Client, Name: name, TTL: 1500 * time.Millisecond, RenewEvery: 100 * time.Millisecond, OnElected: w.onElected("a")})
	eventually(t, 5*time.Second, "a not elected", a.IsLeader)

	ctx := context.Background()
	pauser := testenv.Client(t, r.Addr)
	require.NoError(t, pauser.Do(ctx, pauser.B().ClientPause().Timeout(10000).Write().Build()).Error())
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			require.NoError(t, pauser.Do(ctx, pauser.B().ClientUnpause().Build()).Error())
		}
	}
	defer unpause()
	// Reads go on during a write pause; no renewal can run after this.
	asked := time.Now()
	pttl, err := pauser.Do(ctx, pauser.B().Pttl().Key(markKey(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, pttl)
	expires := asked.Add(time.Duration(pttl) * time.Millisecond)

	eventually(t, 5*time.Second, "a did not report the loss", func() bool {
		rec, _ := w.last()
		return !rec.end.IsZero()
	})
	first, _ := w.last()
	require.True(t, first.end.Before(expires), "loss reported at %v, the lease ran out at %v",
		first.end.Sub(asked), expires.Sub(asked))
	require.False(t, a.IsLeader())

	unpause()
	eventually(t, 10*time.Second, "a did not take the lease back", func() bool { return w.count() == 2 })
	second, _ := w.last()
	require.Equal(t, first.token, second.token, "nobody else held it: the same term goes on")
	v, err := pauser.Do(ctx, pauser.B().Get().Key(markKey(name)).Build()).ToString()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, "c:"), "the mark is a claim: %q", v)
}

// TestStartTwiceAndContext: Start refuses a second call; the end of
// Start's context stops the Elector as Stop does, releasing the lease.
func TestStartTwiceAndContext(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	name := testenv.UniqueID(t)
	e, err := leader.New(leader.Config{Redis: c, Name: name, Logger: quiet()})
	require.NoError(t, err)
	e.Stop() // before Start: nothing to do
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, e.Start(ctx))
	require.ErrorIs(t, e.Start(ctx), leader.ErrStarted)
	eventually(t, 5*time.Second, "not elected", e.IsLeader)
	cancel()
	eventually(t, 5*time.Second, "the lease was not released", func() bool {
		n, err := c.Do(context.Background(), c.B().Exists().Key(markKey(name)).Build()).AsInt64()
		require.NoError(t, err)
		return n == 0
	})
	require.False(t, e.IsLeader())
	e.Stop()
}
