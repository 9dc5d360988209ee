package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// needPrometheus returns the path of Debian's prometheus binary, skipping
// the test without one, or failing it under CI=true, where it must be
// installed (make deps, .ci/run).
func needPrometheus(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("prometheus is not installed; CI must have it (apt-get install -y prometheus)")
	}
	t.Skip("prometheus is not installed (apt-get install -y prometheus): the alert rules are not run on a real Prometheus")
	return ""
}

// process is a command of the test running as a process of its own.
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed once it exited; then err is its Wait's
	err    error
}

// startProc starts bin with args; it gets SIGTERM when the test ends, if
// it still runs.
func startProc(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM, unless the process exited, and waits for it.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop on SIGTERM:\n%s", filepath.Base(p.cmd.Path), p.stderr.String())
	}
}

// wait returns what re's first group matches in the process's log, once
// it is there.
func (p *process) wait(t *testing.T, what string, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	waitFor(t, what, 30*time.Second, func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before %s:\n%s", filepath.Base(p.cmd.Path), p.err, what, p.stderr.String())
		default:
		}
		m = re.FindStringSubmatch(p.stderr.String())
		return m != nil
	})
	return m[1]
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// promAPI reads the HTTP API of a Prometheus server.
type promAPI struct {
	base string
	c    *http.Client // openapitest's: Prometheus's paths are none of ours, and pass unchecked
}

// get decodes the data of the API answer to path (with query) into out.
func (p promAPI) get(t *testing.T, path string, query url.Values, out any) bool {
	t.Helper()
	res, err := p.c.Get(p.base + path + "?" + query.Encode())
	if err != nil {
		return false // not listening yet
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusServiceUnavailable {
		return false // starting: not ready yet
	}
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.Equal(t, "success", body.Status, "%s: %s", path, body.Error)
	require.NoError(t, json.Unmarshal(body.Data, out))
	return true
}

// vector runs an instant query and returns each series' value by the
// value of the label by.
func (p promAPI) vector(t *testing.T, query, by string) map[string]float64 {
	t.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if !p.get(t, "/api/v1/query", url.Values{"query": {query}}, &data) {
		return nil
	}
	out := map[string]float64{}
	for _, r := range data.Result {
		v, err := strconv.ParseFloat(r.Value[1].(string), 64)
		require.NoError(t, err)
		out[r.Metric[by]] = v
	}
	return out
}

// alerts returns the state of each active alert (pending or firing) by
// its name.
func (p promAPI) alerts(t *testing.T) map[string]string {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	require.True(t, p.get(t, "/api/v1/alerts", nil, &data))
	out := map[string]string{}
	for _, a := range data.Alerts {
		out[a.Labels["alertname"]] = a.State
	}
	return out
}

// evaluatedSince says whether every rule group was evaluated after at.
func (p promAPI) evaluatedSince(t *testing.T, at time.Time) bool {
	t.Helper()
	var data struct {
		Groups []struct {
			Name           string    `json:"name"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if !p.get(t, "/api/v1/rules", nil, &data) || len(data.Groups) == 0 {
		return false
	}
	for _, g := range data.Groups {
		if !g.LastEvaluation.After(at) {
			return false
		}
	}
	return true
}

var processMetricsRe = regexp.MustCompile(`msg="metrics listening" addr=([0-9.:]+)`)

// TestAlertsOnRealPrometheus runs the split topology the operations guide
// recommends as real processes, the API (serve --settle=false) and the
// scheduler (hongbao settle), on a durable Redis, and a real Prometheus
// that scrapes both every 500ms and evaluates deploy/prometheus/alerts.yml
// as shipped (no rule rewritten) every 500ms. Once both are scraped and
// the scheduler holds the lease, after a grant was made and settled (and
// both report their ledger up), no alert is pending or firing. When the scheduler process stops, the rule
// for a missing scheduler turns pending within seconds, and the lease
// rule, which holds over the processes that run a scheduler, does not
// count the API as one.
func TestAlertsOnRealPrometheus(t *testing.T) {
	prom := needPrometheus(t)
	t.Parallel()
	if promtool, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput()
		require.NoError(t, err, "promtool check rules: %s", out)
	}
	alerts, err := filepath.Abs(alertsFile)
	require.NoError(t, err)
	fx := newServeFixture(t, redisserver.Options{}) // appendfsync always, as a deployment runs it
	bin := buildBinary(t)

	api := startProc(t, bin, append([]string{"serve"}, fx.args("--settle=false", "--metrics-listen", "127.0.0.1:0", "--data-dir", t.TempDir())...)...)
	apiMetrics := api.wait(t, "serve's metrics listener", processMetricsRe)
	sched := startProc(t, bin, "settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--lease-ttl", "1s",
		"--consumer", "scheduler-1", "--metrics-listen", "127.0.0.1:0")
	schedMetrics := sched.wait(t, "settle's metrics listener", processMetricsRe)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
  evaluation_interval: 500ms
rule_files: [%q]
scrape_configs:
  - job_name: hongbao
    static_configs:
      - targets: [%q]
        labels: {role: api}
      - targets: [%q]
        labels: {role: scheduler}
`, alerts, apiMetrics, schedMetrics)), 0o600))
	listen := freeAddr(t)
	startProc(t, prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	p := promAPI{base: "http://" + listen, c: openapitest.Client(t)}

	// Traffic: a grant the scheduler settles.
	base := "http://" + api.wait(t, "serve's API", regexp.MustCompile(`msg=serving addr=([0-9.:]+)`))
	c := fx.api(t, base)
	id := c.create(t, base, `{"total":"1.00","count":2}`)
	code, m, err := c.call("POST", base+"/v1/campaigns/"+id+"/grab", c.userToken(t, "prom"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)

	waitFor(t, "both processes scraped, the lease held, the grant settled", 30*time.Second, func() bool {
		up := p.vector(t, "up", "role")
		lease := p.vector(t, "hongbao_scheduler_lease_held", "role")
		settled := p.vector(t, "hongbao_settlement_grants_total", "role")
		lag := p.vector(t, "hongbao_settlement_lag_entries", "role")
		ledgerUp := p.vector(t, "hongbao_ledger_up", "role")
		return up["api"] == 1 && up["scheduler"] == 1 && lease["scheduler"] == 1 && len(lease) == 1 &&
			settled["scheduler"] == 1 && len(lag) == 1 && lag["api"] == 0 && ledgerUp["api"] == 1 && ledgerUp["scheduler"] == 1
	})
	steady := time.Now()
	waitFor(t, "the rules evaluated on the steady state", 10*time.Second, func() bool { return p.evaluatedSince(t, steady) })
	require.Empty(t, p.alerts(t), "nothing pending or firing in a healthy split deployment")

	sched.stop(t)
	waitFor(t, "HongbaoNoScheduler pending", 20*time.Second, func() bool { return p.alerts(t)["HongbaoNoScheduler"] == "pending" })
	require.Equal(t, map[string]float64{"api": 1, "scheduler": 0}, p.vector(t, "up", "role"))
	require.NotContains(t, p.alerts(t), "HongbaoNoSchedulerLease", "the API is no scheduler waiting for the lease")
}
