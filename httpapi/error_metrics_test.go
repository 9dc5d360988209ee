package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/settle"
)

// TestErrorMetrics: a grab whose WAIT no replica acknowledges is answered
// outcome_unknown and counted as such (not lumped with errors), its WAIT
// is counted as a shortfall of a grab (the other operations' series at
// 0, as every op is exported from the start), and the
// settlement worker's failed passes are exported: the dashboard's panels
// of Redis and ledger errors and of WAIT shortfalls read these.
func TestErrorMetrics(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"}) // no replica: every WAIT falls short
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewSettlement(fixedStats{Failures: 3}))
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Engine, c.Settlement, c.Registry = eng, settle.NewBacklogs(r.Client, ""), reg
	})
	id := ts.create(t, `{"total":"1.00","count":2}`)
	g := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "wu"), "")
	require.Equal(t, http.StatusServiceUnavailable, g.Status, "%s", g.Body)
	require.Equal(t, httpapi.CodeOutcomeUnknown, g.errorCode(t))

	m := ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, m.Status)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(m.Body), "\n") {
		lines[l] = true
	}
	for line, want := range map[string]bool{
		`hongbao_grabs_total{outcome="outcome_unknown"} 1`: true,
		`hongbao_grabs_total{outcome="error"} 1`:           false,
		`hongbao_settlement_failures_total 3`:              true,
		`hongbao_wait_short_total{op="grab"} 1`:            true,
		`hongbao_wait_short_total{op="reserve"} 0`:         true,
		`hongbao_wait_replicas 1`:                          true,
		`hongbao_wait_short_last_acked_replicas 0`:         true,
	} {
		require.Equal(t, want, lines[line], "the scrape has %q: %v", line, lines[line])
	}
}

// fixedStats are a settlement worker's counters, as a test sets them.
type fixedStats settle.Stats

func (f fixedStats) Stats() settle.Stats { return settle.Stats(f) }
