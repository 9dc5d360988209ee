package httpapi_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules parses the example alert rules and checks that every
// metric they name is exported by the API with a scheduler's metrics
// beside it (metrics.NewScheduler, which serve registers when it runs
// one, and hongbao settle always).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	require.NoError(t, err)
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rf))
	require.NotEmpty(t, rf.Groups)

	rc := testenv.SharedRedis(t).Client
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	sched, err := scheduler.New(scheduler.Config{Settle: settle.Config{Redis: rc, Ledger: l, Logger: quiet()}, Logger: quiet()})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	// As serve registers them: the scheduler's, and the ledger's.
	reg.MustRegister(metrics.NewScheduler(sched), metrics.NewLedger(l.Ping))
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Registry = reg
		c.SettledCents = func(context.Context, string) (int64, error) { return 0, nil }
	})
	ts.do(t, "GET", "/healthz", "", "")
	r := ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status)
	// The exact names of the exported series: a name in a rule must be
	// one of them, not merely the prefix of one (hongbao_grabs is not
	// hongbao_grabs_total).
	exported := map[string]bool{}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		exported[name] = true
	}
	require.True(t, exported["hongbao_grabs_total"], "the exposition was not read")
	require.True(t, exported["hongbao_scheduler_lease_held"], "the scheduler's metrics were not read")

	metricRe := regexp.MustCompile(`\bhongbao_[a-z_]+\b`)
	alerts := map[string]bool{}
	covered := map[string]bool{}
	for _, g := range rf.Groups {
		require.NotEmpty(t, g.Name)
		for _, rule := range g.Rules {
			require.NotEmpty(t, rule.Alert)
			require.False(t, alerts[rule.Alert], "alert %s twice", rule.Alert)
			alerts[rule.Alert] = true
			require.NotEmpty(t, rule.Expr, rule.Alert)
			require.Contains(t, []string{"warning", "critical"}, rule.Labels["severity"], rule.Alert)
			require.NotEmpty(t, rule.Annotations["summary"], rule.Alert)
			if rule.For != "" {
				_, err := time.ParseDuration(rule.For)
				require.NoError(t, err, rule.Alert)
			}
			require.Equal(t, strings.Count(rule.Expr, "("), strings.Count(rule.Expr, ")"), rule.Alert)
			names := metricRe.FindAllString(rule.Expr, -1)
			require.NotEmpty(t, names, rule.Alert)
			for _, n := range names {
				covered[n] = true
				require.True(t, exported[n], "alert %s names %s, which is not exported", rule.Alert, n)
			}
		}
	}
	// The list: lag, pending age, dead entries, conflicts, Redis
	// not fsync-always.
	for _, n := range []string{"hongbao_settlement_lag_entries", "hongbao_settlement_oldest_pending_seconds",
		"hongbao_settlement_dead_entries", "hongbao_settlement_conflicts_total", "hongbao_redis_fsync_always",
		"hongbao_settlement_refused_total", "hongbao_settlement_lag_cents"} {
		require.True(t, covered[n], "no alert on %s", n)
	}
}
