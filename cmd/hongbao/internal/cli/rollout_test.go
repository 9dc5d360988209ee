package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

var servingRe = regexp.MustCompile(`msg=serving addr=([0-9.:]+)`)

// TestServeRollout is a rolling update's end of a pod, as the built
// binary lives it: clients grab and read without pause, on new
// connections and on kept-alive ones, while a gateway's probe reads
// /readyz. On SIGTERM serve answers /readyz 503 and keeps serving
// everything else, on open connections and new ones, for
// --shutdown-delay; the clients stop sending a while after the probe saw
// the 503, as a gateway would; then serve closes its listener, finishes what is
// in flight and exits 0. No connection is refused and no request fails
// on the way. A second serve, told to wait a minute, stops at once on a
// second SIGTERM.
func TestServeRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	bin := buildBinary(t)
	const delay = 2 * time.Second
	p := startProc(t, bin, append([]string{"serve"}, fx.args("--settle=false", "--user-rate", "-1", "--shutdown-delay", delay.String())...)...)
	base := "http://" + p.wait(t, "serve to listen", servingRe)
	api := fx.api(t, base)
	id := api.create(t, base, `{"total":"100.00","count":5000}`)

	fresh := &http.Transport{DisableKeepAlives: true} // a new connection each request
	kept := &http.Transport{MaxIdleConnsPerHost: 8}
	t.Cleanup(kept.CloseIdleConnections)
	clients := map[string]*http.Client{
		"new connections": {Transport: openapitest.Transport(t, fresh), Timeout: 10 * time.Second},
		"kept alive":      {Transport: openapitest.Transport(t, kept), Timeout: 10 * time.Second},
	}

	var (
		stopped        atomic.Bool // the gateway acted on /readyz's 503: send nothing more
		sent, answered atomic.Int64
		afterSignal    atomic.Int64 // answered after SIGTERM
		signalled      atomic.Bool
		mu             sync.Mutex
		failures       []string
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, a...))
	}
	do := func(c *http.Client, method, path, auth string) (int, bool) {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			fail("%v", err)
			return 0, false
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		sent.Add(1)
		res, err := c.Do(req)
		if err != nil {
			fail("%s %s: %v", method, path, err)
			return 0, false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		answered.Add(1)
		if signalled.Load() {
			afterSignal.Add(1)
		}
		return res.StatusCode, true
	}

	var wg sync.WaitGroup
	var users atomic.Int64
	for name, c := range clients {
		for range 3 {
			wg.Go(func() {
				for !stopped.Load() {
					u := fmt.Sprint("roll", users.Add(1))
					if code, ok := do(c, "POST", "/v1/campaigns/"+id+"/grab", api.userToken(t, u)); ok && code != http.StatusOK {
						fail("%s: grab answered %d", name, code)
					}
					if code, ok := do(c, "GET", "/healthz", ""); ok && code != http.StatusOK {
						fail("%s: /healthz answered %d", name, code)
					}
				}
			})
		}
	}
	// The gateway's probe, on a connection of its own each time.
	probe := clients["new connections"]
	sawNotReady := make(chan time.Time, 1)
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			code, ok := do(probe, "GET", "/readyz", "")
			if !ok {
				stopped.Store(true)
				return
			}
			if code == http.StatusServiceUnavailable {
				sawNotReady <- time.Now()
				// The gateway takes a while to act on it (its probe's
				// failure threshold, its configuration's spread): the
				// clients go on for half the delay.
				time.AfterFunc(delay/2, func() { stopped.Store(true) })
				return
			}
		}
	})

	waitFor(t, "traffic", 10*time.Second, func() bool { return answered.Load() > 200 })
	signalled.Store(true)
	sigAt := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	var notReadyAt time.Time
	select {
	case notReadyAt = <-sawNotReady:
	case <-p.exited:
		t.Fatalf("serve exited before /readyz said 503:\n%s", p.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("/readyz never said 503 (failures: %v)", failures)
	}
	wg.Wait()
	// Past the probe's 503 the listener still takes new connections: the
	// delay is for the gateways that have not seen it yet.
	code, ok := do(probe, "GET", "/healthz", "")
	require.True(t, ok, "a new connection after /readyz said 503: %v", failures)
	require.Equal(t, http.StatusOK, code)
	kept.CloseIdleConnections()

	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit:\n%s", p.stderr.String())
	}
	require.NoError(t, p.err, p.stderr.String())
	exitAt := time.Now()
	require.Empty(t, failures, "refused connections or failed requests before serve exited")
	require.Equal(t, sent.Load(), answered.Load())
	require.Positive(t, afterSignal.Load(), "requests were answered after SIGTERM")
	require.GreaterOrEqual(t, exitAt.Sub(sigAt), delay, "the listener stayed open for --shutdown-delay")
	require.Less(t, notReadyAt.Sub(sigAt), delay, "/readyz said 503 at once")
	require.Contains(t, p.stderr.String(), "shutting down: /readyz answers 503")
	t.Logf("%d requests answered, %d after SIGTERM; /readyz 503 after %v, exit after %v",
		answered.Load(), afterSignal.Load(), notReadyAt.Sub(sigAt).Round(time.Millisecond), exitAt.Sub(sigAt).Round(time.Millisecond))

	// A second signal skips what is left of the delay.
	p = startProc(t, bin, append([]string{"serve"}, fx.args("--settle=false", "--shutdown-delay", "1m")...)...)
	p.wait(t, "the second serve to listen", servingRe)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.wait(t, "the delay to begin", regexp.MustCompile(`(shutting down: /readyz answers 503)`))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on a second SIGTERM:\n%s", p.stderr.String())
	}
	require.NoError(t, p.err, p.stderr.String())
	require.Contains(t, p.stderr.String(), "a second signal")
}

// TestHealthcheck: hongbao healthcheck exits 0 on a 2xx, 1 with the
// status and the error's message on anything else, 1 when nothing
// answers in time or nothing listens, and 2 for bad arguments.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"not_ready","message":"not ready: replicas: 0 of 1 replicas attached"}}`)
		case "/slow":
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		default:
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		}
	}))
	t.Cleanup(func() { close(hold); srv.Close() })

	code, out, errs := run(t, nil, "healthcheck", srv.URL+"/healthz")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "200 OK")
	code, _, errs = run(t, nil, "healthcheck", srv.URL+"/readyz")
	require.Equal(t, 1, code)
	require.Equal(t, "hongbao healthcheck: "+srv.URL+"/readyz answered 503 Service Unavailable: not_ready: not ready: replicas: 0 of 1 replicas attached\n", errs)
	code, _, errs = run(t, nil, "healthcheck", "--timeout", "100ms", srv.URL+"/slow")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no answer within 100ms")
	code, _, errs = run(t, nil, "healthcheck", "http://"+freeAddr(t)+"/healthz")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "connection refused")
	require.Equal(t, 1, strings.Count(errs, "\n"), "one line")
	for _, args := range [][]string{{}, {"not a url"}, {"ftp://x/"}, {"--timeout", "0", srv.URL}, {srv.URL, srv.URL}} {
		code, _, errs = run(t, nil, append([]string{"healthcheck"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
	}
}
