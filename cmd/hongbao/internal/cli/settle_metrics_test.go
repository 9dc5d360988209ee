package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// settleProc is a settle command running in-process, serving its metrics.
type settleProc struct {
	metrics string // the base URL of --metrics-listen
	cancel  context.CancelFunc
	done    chan int
	stderr  *syncBuffer
}

// metricsAddrRe finds the address of "metrics listening" in a text or a
// JSON log.
var metricsAddrRe = regexp.MustCompile(`(?:msg="metrics listening" addr=|"msg":"metrics listening","addr":")([0-9.:]+)`)

// startSettle runs hongbao settle with args and --metrics-listen on a free
// port, and waits for its metrics listener.
func startSettle(t *testing.T, args ...string) *settleProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &settleProc{cancel: cancel, done: make(chan int, 1), stderr: &syncBuffer{}}
	args = append([]string{"settle", "--metrics-listen", "127.0.0.1:0"}, args...)
	go func() {
		p.done <- Run(ctx, args, &IO{Stdout: &syncBuffer{}, Stderr: p.stderr, Getenv: func(string) string { return "" }})
	}()
	waitFor(t, "settle's metrics listener", 30*time.Second, func() bool {
		select {
		case code := <-p.done:
			t.Fatalf("settle exited with %d: %s", code, p.stderr.String())
		default:
		}
		m := metricsAddrRe.FindStringSubmatch(p.stderr.String())
		if m != nil {
			p.metrics = "http://" + m[1]
		}
		return m != nil
	})
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop cancels the context (SIGTERM) and checks the clean exit.
func (p *settleProc) stop(t *testing.T) {
	t.Helper()
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	select {
	case code := <-p.done:
		require.Equal(t, 0, code, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("settle did not stop")
	}
}

// get reads path of the metrics listener: its status and body, checked
// against openapi.json as serve's /metrics and /healthz are.
func (p *settleProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := openapitest.Client(t).Get(p.metrics + path)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// has says whether the scrape of p holds the line.
func (p *settleProc) has(t *testing.T, line string) bool {
	t.Helper()
	code, body := p.get(t, "/metrics")
	return code == http.StatusOK && strings.Contains(body, "\n"+line+"\n")
}

// TestSettleMetricsListen: hongbao settle serves /metrics and /healthz on
// --metrics-listen: the lease held by one of two processes, 0 on the
// other, the parts, the settlement counters, the Go runtime's; the one
// that waits logs whom it waits for (in JSON with --log-format json, every
// line, durations as text), and takes the lease over when the holder
// stops; its build is hongbao_build_info.
func TestSettleMetricsListen(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	common := []string{"--redis", fx.redisURL(), "--ledger", fx.dsn, "--lease-ttl", "1s"}
	a := startSettle(t, append(common, "--consumer", "settle-a")...)
	waitFor(t, "a to hold the lease", 10*time.Second, func() bool { return a.has(t, "hongbao_scheduler_lease_held 1") })
	b := startSettle(t, append(common, "--consumer", "settle-b", "--log-format", "json")...)

	code, body := b.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, line := range []string{"hongbao_scheduler_lease_held 0", "hongbao_scheduler_parts 1", "hongbao_scheduler_parts_held 0",
		"hongbao_settlement_conflicts_total 0", "hongbao_settlement_refused_total 0", "hongbao_settlement_failures_total 0",
		"hongbao_settlement_foreign_total 0", "hongbao_settlement_grants_total 0"} {
		require.Contains(t, body, "\n"+line+"\n")
	}
	require.Contains(t, body, "\ngo_goroutines ")
	require.Regexp(t, `\nhongbao_build_info\{goversion="go[^"]+",revision="[^"]*",version="[^"]+"\} 1\n`, body)
	require.True(t, a.has(t, "hongbao_scheduler_parts_held 1"))
	code, body = a.get(t, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)

	waitFor(t, "b to say whom it waits for", 10*time.Second, func() bool {
		return strings.Contains(b.stderr.String(), `"msg":"waiting for the lease: another process holds it"`)
	})
	require.Contains(t, b.stderr.String(), `"holder":"settle-a"`)
	require.Contains(t, b.stderr.String(), `"self":"settle-b"`)
	// A duration is text ("980ms"), not nanoseconds; every line is JSON.
	require.Regexp(t, `"expires_in":"[0-9.]+m?s"`, b.stderr.String())
	for _, line := range strings.Split(strings.TrimSpace(b.stderr.String()), "\n") {
		require.True(t, json.Valid([]byte(line)), "not JSON: %s", line)
	}

	a.stop(t)
	waitFor(t, "b to take the lease over", 10*time.Second, func() bool { return b.has(t, "hongbao_scheduler_lease_held 1") })
}

// TestSettleFlags: settle's help names its flags; a bad --log-format or
// --metrics-listen is a usage error, before any connection.
func TestSettleFlags(t *testing.T) {
	t.Parallel()
	code, _, errs := run(t, nil, "settle", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errs, "Usage: hongbao settle [flags]")
	require.Contains(t, errs, "serve --settle=false")
	for _, f := range []string{"-metrics-listen", "-log-format", "-lease", "-settle-parts", "-drain"} {
		require.Contains(t, errs, f)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--log-format", "xml", "--log-format must be text or json"},
		{"--metrics-listen", "not-an-address", `--metrics-listen "not-an-address"`},
	} {
		code, _, errs = run(t, nil, "settle", "--redis", "redis://127.0.0.1:1", "--ledger", "sqlite:x.db", tc.flag, tc.value)
		require.Equal(t, 2, code, errs)
		require.Contains(t, errs, tc.want)
	}
}
