package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// The dashboard and the alert rules an operator deploys, as the repository
// ships them.
const (
	dashboardFile = "../../../../deploy/grafana/hongbao.json"
	alertsFile    = "../../../../deploy/prometheus/alerts.yml"
)

// TestDashboardAndAlertsQueryExportedSeries starts serve, runs a small
// rain (a red packet campaign and a discount campaign, grabs, a reserve
// and its confirm through the payment key, a refused credential), scrapes
// /metrics with a metrics key, and checks that every series a dashboard
// panel or an alert rule queries is in the scrape, with every label its
// selectors match on: a renamed metric or label fails here, not on the
// on-call's night.
func TestDashboardAndAlertsQueryExportedSeries(t *testing.T) {
	t.Parallel()
	queries := append(dashboardQueries(t), alertQueries(t)...)
	require.Greater(t, len(queries), 20, "the dashboard and the alerts were not read")

	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	payFile := writeSecret(t, fx.dir, "payment.key")
	metricsFile := writeSecret(t, fx.dir, "metrics.key")
	p := startServe(t, fx.args("--user-rate", "-1", "--payment-key-file", payFile, "--metrics-key-file", metricsFile)...)
	api := fx.api(t, p.URL)
	smallRain(t, api, p.URL, readSecret(t, payFile))

	code, body, err := api.raw("GET", p.URL+"/metrics", readSecret(t, metricsFile))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	exported := exportedSeries(t, body)
	require.Contains(t, exported, "hongbao_grabs_total", "the scrape was not read")

	if problems := missingSeries(t, queries, exported); len(problems) > 0 {
		t.Fatalf("series queried but not exported:\n%s", strings.Join(problems, "\n"))
	}
}

// TestDashboardAndAlertsSplitTopology: in the topology the operations
// guide recommends, API processes without the scheduler (serve
// --settle=false) and a scheduler process (hongbao settle
// --metrics-listen), every series a panel or a rule queries is exported
// by one of them; each exports the metrics of its own duties: the API no
// scheduler series (a lease gauge at 0 there would claim a missing
// scheduler) and no settlement counters, the scheduler both.
func TestDashboardAndAlertsSplitTopology(t *testing.T) {
	t.Parallel()
	queries := append(dashboardQueries(t), alertQueries(t)...)
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	payFile := writeSecret(t, fx.dir, "payment.key")
	metricsFile := writeSecret(t, fx.dir, "metrics.key")
	p := startServe(t, fx.args("--settle=false", "--user-rate", "-1", "--payment-key-file", payFile, "--metrics-key-file", metricsFile)...)
	sp := startSettle(t, "--redis", fx.redisURL(), "--ledger", fx.dsn, "--lease-ttl", "1s")
	api := fx.api(t, p.URL)
	smallRain(t, api, p.URL, readSecret(t, payFile))
	waitFor(t, "the scheduler to settle the rain", 10*time.Second, func() bool {
		return sp.has(t, "hongbao_scheduler_lease_held 1") && !sp.has(t, "hongbao_settlement_grants_total 0")
	})

	code, body, err := api.raw("GET", p.URL+"/metrics", readSecret(t, metricsFile))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	fromAPI := exportedSeries(t, body)
	code, body = sp.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	fromScheduler := exportedSeries(t, body)
	require.Contains(t, fromAPI, "hongbao_grabs_total", "the API's scrape was not read")
	for name := range fromAPI {
		require.False(t, strings.HasPrefix(name, "hongbao_scheduler_"), "serve --settle=false exports %s", name)
		require.False(t, strings.HasSuffix(name, "_total") && strings.HasPrefix(name, "hongbao_settlement_"),
			"serve --settle=false exports the settlement counter %s of a worker it does not run", name)
	}
	for _, name := range []string{"hongbao_scheduler_lease_held", "hongbao_scheduler_parts", "hongbao_scheduler_parts_held",
		"hongbao_settlement_conflicts_total", "hongbao_settlement_refused_total", "hongbao_settlement_failures_total",
		"hongbao_settlement_foreign_total"} {
		require.Contains(t, fromScheduler, name)
	}

	both := map[string]map[string]bool{}
	for _, m := range []map[string]map[string]bool{fromAPI, fromScheduler} {
		for name, ls := range m {
			if both[name] == nil {
				both[name] = map[string]bool{}
			}
			for l := range ls {
				both[name][l] = true
			}
		}
	}
	if problems := missingSeries(t, queries, both); len(problems) > 0 {
		t.Fatalf("series queried but exported by neither process:\n%s", strings.Join(problems, "\n"))
	}
}

// smallRain makes serve export every series it can: grabs granted and
// repeated, a reservation confirmed and one cancelled, and a request with
// a bad token. Both campaigns stay live, so their gauges are in the
// scrape.
func smallRain(t *testing.T, api *apiClient, base, payKey string) {
	t.Helper()
	id := api.create(t, base, `{"total":"10.00","count":50}`)
	for u := 0; u < 10; u++ {
		tok := api.userToken(t, fmt.Sprint("dash", u))
		for click, want := range []string{"granted", "already_granted"} {
			code, m, err := api.call("POST", base+"/v1/campaigns/"+id+"/grab", tok, "")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, "%v", m)
			require.Equal(t, want, m["outcome"], "click %d", click)
		}
	}
	code, m, err := api.call("POST", base+"/v1/campaigns/"+id+"/grab", "not-a-token", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code, "%v", m)

	code, m, err = api.call("POST", base+"/v1/discounts", api.admin, `{"budget":"10.00","quota":10,"hold":"1m"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	disc := base + "/v1/discounts/" + m["id"].(string)
	for _, c := range []struct{ path, body, outcome string }{
		{"/reserve", `{"user_id":"kim","order_id":"o-1","order_amount":"100.00"}`, "reserved"},
		{"/orders/o-1/confirm", `{"user_id":"kim"}`, "confirmed"},
		{"/reserve", `{"user_id":"lee","order_id":"o-2","order_amount":"100.00"}`, "reserved"},
		{"/orders/o-2/cancel", `{"user_id":"lee"}`, "cancelled"},
	} {
		code, m, err := api.call("POST", disc+c.path, payKey, c.body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%s: %v", c.path, m)
		require.Equal(t, c.outcome, m["outcome"], c.path)
	}
}

func readSecret(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// promQuery is one PromQL expression and where it was found.
type promQuery struct{ where, expr string }

// dashboardQueries returns every "expr" of the dashboard, each named by
// the title of the panel that holds it.
func dashboardQueries(t *testing.T) []promQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d any
	require.NoError(t, json.Unmarshal(b, &d))
	var out []promQuery
	var walk func(v any, title string)
	walk = func(v any, title string) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok {
				out = append(out, promQuery{where: fmt.Sprintf("panel %q %v", title, v["refId"]), expr: e})
			}
			for _, c := range v {
				walk(c, title)
			}
		case []any:
			for _, c := range v {
				walk(c, title)
			}
		}
	}
	walk(d, "")
	return out
}

// alertQueries returns the expression of every alerting and recording
// rule.
func alertQueries(t *testing.T) []promQuery {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var rf struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rf))
	var out []promQuery
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, promQuery{where: "alert " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	return out
}

// exportedSeries reads a text exposition into the names of the series a
// query can select, each with the label names it carries. A histogram x
// is selected as x_bucket (with le), x_sum and x_count; a summary as x
// (with quantile), x_sum and x_count.
func exportedSeries(t *testing.T, exposition string) map[string]map[string]bool {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(exposition))
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	add := func(name string, ls map[string]bool, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for l := range ls {
			out[name][l] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range fams {
		ls := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				ls[lp.GetName()] = true
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			add(name+"_bucket", ls, "le")
			add(name+"_sum", ls)
			add(name+"_count", ls)
		case dto.MetricType_SUMMARY:
			add(name, ls, "quantile")
			add(name+"_sum", ls)
			add(name+"_count", ls)
		default:
			add(name, ls)
		}
	}
	return out
}

// grafanaVars are the interval variables of Grafana that a panel's query
// may hold where PromQL takes a duration.
var grafanaVars = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}`)

// missingSeries parses every query with the PromQL parser and returns one
// line for each selector whose metric, or one of whose matched labels, is
// not exported.
func missingSeries(t *testing.T, queries []promQuery, exported map[string]map[string]bool) []string {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	var problems []string
	for _, q := range queries {
		expr, err := p.ParseExpr(grafanaVars.ReplaceAllString(q.expr, "5m"))
		require.NoError(t, err, "%s: %s", q.where, q.expr)
		selectors := 0
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.VectorSelector:
				selectors++
				problems = append(problems, checkSelector(q.where, n, exported)...)
			case *parser.AggregateExpr:
				problems = append(problems, checkGrouping(q.where, n, exported)...)
			}
			return nil
		})
		require.NotZero(t, selectors, "%s queries no series: %s", q.where, q.expr)
	}
	sort.Strings(problems)
	return problems
}

// checkSelector checks one selector: a metric name given exactly, and
// exported with every label the selector matches on.
func checkSelector(where string, vs *parser.VectorSelector, exported map[string]map[string]bool) []string {
	name := selectorName(vs)
	if name == "" {
		return []string{fmt.Sprintf("%s: %s names no metric exactly", where, vs)}
	}
	ls, ok := exported[name]
	if !ok {
		return []string{fmt.Sprintf("%s: %s is not exported", where, name)}
	}
	var out []string
	for _, m := range vs.LabelMatchers {
		if m.Name != model.MetricNameLabel && !ls[m.Name] {
			out = append(out, fmt.Sprintf("%s: %s has no label %s", where, name, m.Name))
		}
	}
	return out
}

// selectorName is the metric a selector names exactly, or "".
func selectorName(vs *parser.VectorSelector) string {
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return vs.Name
}

// checkGrouping checks the labels of an aggregation's by clause: each must
// be carried by a series the aggregated expression selects (a renamed label
// would otherwise fold every series into one, silently).
func checkGrouping(where string, agg *parser.AggregateExpr, exported map[string]map[string]bool) []string {
	if agg.Without || len(agg.Grouping) == 0 {
		return nil
	}
	carried := map[string]bool{}
	names := []string{}
	parser.Inspect(agg.Expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, selectorName(vs))
			for l := range exported[selectorName(vs)] {
				carried[l] = true
			}
		}
		return nil
	})
	var out []string
	for _, l := range agg.Grouping {
		if !carried[l] {
			out = append(out, fmt.Sprintf("%s: %s by %s, a label no series of %s has", where, agg.Op, l, strings.Join(names, ", ")))
		}
	}
	return out
}

// TestMissingSeriesCatches: the check reports a renamed metric, a
// histogram asked for by its bare name, a label the series lacks (matched
// or summed by), and a name it cannot check, and accepts a histogram's _bucket, _sum and _count.
func TestMissingSeriesCatches(t *testing.T) {
	t.Parallel()
	exported := exportedSeries(t, `# TYPE req_total counter
req_total{outcome="ok"} 3
# TYPE lat_seconds histogram
lat_seconds_bucket{route="/a",le="0.1"} 1
lat_seconds_bucket{route="/a",le="+Inf"} 2
lat_seconds_sum{route="/a"} 0.3
lat_seconds_count{route="/a"} 2
# TYPE up gauge
up 1
`)
	ok := []promQuery{
		{"a", `sum by (outcome) (rate(req_total{outcome="ok"}[$__rate_interval]))`},
		{"b", `histogram_quantile(0.99, sum by (le, route) (rate(lat_seconds_bucket{route!=""}[5m])))`},
		{"c", `sum(rate(lat_seconds_sum[5m])) / sum(rate(lat_seconds_count[5m])) and on() up == 1`},
		{"d", `{__name__="up"}`},
	}
	require.Empty(t, missingSeries(t, ok, exported))
	bad := []promQuery{
		{"renamed", `sum(rate(req_count[5m]))`},
		{"bare histogram", `lat_seconds`},
		{"label", `req_total{code=~"5.."} / up`},
		{"regex name", `{__name__=~"req.*"}`},
		{"grouping", `sum by (code) (rate(req_total[5m]))`},
	}
	require.Equal(t, []string{
		`bare histogram: lat_seconds is not exported`,
		`grouping: sum by code, a label no series of req_total has`,
		`label: req_total has no label code`,
		`regex name: {__name__=~"req.*"} names no metric exactly`,
		`renamed: req_count is not exported`,
	}, missingSeries(t, bad, exported))
}
