package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

var cmdstatRe = regexp.MustCompile(`(?m)^cmdstat_([a-z|_-]+):calls=(\d+)`)

// redisCalls reads the commands the server has run, by INFO
// commandstats, leaving out INFO itself (the measurement's own).
func (f *serveFixture) redisCalls(t *testing.T) int64 {
	t.Helper()
	c := f.redis.Client
	s, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var n int64
	for _, m := range cmdstatRe.FindAllStringSubmatch(s, -1) {
		if m[1] == "info" {
			continue
		}
		v, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		n += v
	}
	return n
}

// leaseHeld says whether some process holds the scheduler lease.
func (f *serveFixture) leaseHeld(t *testing.T) bool {
	t.Helper()
	c := f.redis.Client
	n, err := c.Do(t.Context(), c.B().Exists().Key("hb:lease:{scheduler}:mark").Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// TestServeIdleIsIdle: a serve with no campaign makes at most 10 Redis
// calls a second (it used to poll settlement every 20ms, about 100), and a
// grant made after that idle spell is in the ledger within 100ms of its
// answer.
func TestServeIdleIsIdle(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1")...)
	waitFor(t, "the scheduler lease", 10*time.Second, func() bool { return fx.leaseHeld(t) })
	const window = 5 * time.Second
	before, start := fx.redisCalls(t), time.Now()
	time.Sleep(window) // the measurement itself, not a synchronisation
	calls, took := fx.redisCalls(t)-before, time.Since(start)
	rate := float64(calls) / took.Seconds()
	t.Logf("idle serve: %d Redis calls in %s (%.1f/s)", calls, took.Round(time.Millisecond), rate)
	require.LessOrEqual(t, rate, 10.0, "an idle serve polls Redis too often")

	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"10.00","count":4}`)
	led, err := open.Open(t.Context(), fx.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, "first"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)
	answered := time.Now()
	var lag time.Duration
	waitForEvery(t, "the grant in the ledger", 10*time.Second, time.Millisecond, func() bool {
		tot, err := led.Totals(t.Context(), id)
		lag = time.Since(answered)
		return err == nil && tot.GrantCount == 1
	})
	t.Logf("the grant was in the ledger %s after its answer", lag.Round(time.Millisecond))
	// Settled by the wake, not by the next idle poll (1s): on a quiet
	// machine this is tens of milliseconds; the bound leaves room for a
	// loaded one and still fails if no wake arrives.
	require.Less(t, lag, 600*time.Millisecond, "settled by the idle poll, not by a wake")
}

// waitForEvery polls cond every step until it holds or d passes.
func waitForEvery(t *testing.T, what string, d, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(step)
	}
}

// TestServeSettleFalse: serve --settle=false runs the API alone: it takes
// no lease and its grants wait in Redis, until a hongbao settle process,
// the deployment's scheduler, settles them.
func TestServeSettleFalse(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1", "--settle=false")...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"10.00","count":4}`)
	for i := range 3 {
		code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, fmt.Sprintf("u%d", i)), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
	}
	require.False(t, fx.leaseHeld(t), "serve --settle=false took the scheduler lease")
	b, err := settle.ReadBacklog(t.Context(), fx.redis.Client, "", id)
	require.NoError(t, err)
	require.EqualValues(t, 3, b.Lag, "no grant was even read for settlement")
	require.NotContains(t, p.stderr.String(), "lease acquired")

	ctx, cancel := context.WithCancel(context.Background())
	errb := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--lease-ttl", "1s"},
			&IO{Stdout: &syncBuffer{}, Stderr: errb, Getenv: func(string) string { return "" }})
	}()
	led, err := open.Open(t.Context(), fx.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	waitFor(t, "hongbao settle to settle the grants", 20*time.Second, func() bool {
		tot, err := led.Totals(t.Context(), id)
		return err == nil && tot.GrantCount == 3
	})
	require.True(t, fx.leaseHeld(t), "hongbao settle holds the lease")
	cancel()
	require.Equal(t, 0, <-done, errb.String())
}

// TestServeMaxBacklog: serve --settle=false --max-backlog 1 answers a
// campaign's grabs 503 once more than one of its grant batches waits for
// settlement, and grants again once hongbao settle has drained them.
func TestServeMaxBacklog(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1", "--settle=false", "--max-backlog", "1")...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"10.00","count":20}`)
	user := 0
	grab := func() int {
		user++
		code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, fmt.Sprintf("u%d", user)), "")
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code, "%v", m)
		return code
	}
	require.Equal(t, http.StatusOK, grab())
	require.Equal(t, http.StatusOK, grab())
	waitFor(t, "grabs to answer busy", 10*time.Second, func() bool { return grab() == http.StatusServiceUnavailable })
	code, out, errs := run(t, nil, "settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--drain")
	require.Equal(t, 0, code, "%s %s", out, errs)
	waitFor(t, "grabs to be granted again", 10*time.Second, func() bool { return grab() == http.StatusOK })
}
