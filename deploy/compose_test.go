package deploy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// loadCompose loads compose/compose.yaml as docker compose would: the
// compose specification's schema, interpolation, the consistency checks
// (every secret, config, volume and depends_on named exists).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	return loadComposeEnv(t, types.Mapping{})
}

// loadComposeEnv loads compose/compose.yaml with env as the environment
// (what --env-file gives).
func loadComposeEnv(t *testing.T, env types.Mapping) *types.Project {
	t.Helper()
	dir, err := filepath.Abs("compose")
	require.NoError(t, err)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: env,
	}, func(o *loader.Options) { o.ResolvePaths = true })
	require.NoError(t, err)
	return p
}

// TestComposeImagesFromVariables: without an environment the file names
// the upstream images, so the file a user downloads runs unchanged; each
// image comes from a variable, so that make drill-images' env file runs
// the same file on images built without a pull.
func TestComposeImagesFromVariables(t *testing.T) {
	t.Parallel()
	upstream := map[string]string{
		"api-1": "hongbao:dev", "api-2": "hongbao:dev", "scheduler": "hongbao:dev",
		"redis-primary": "redis:7.2", "redis-replica": "redis:7.2",
		"sentinel-1": "redis:7.2", "sentinel-2": "redis:7.2", "sentinel-3": "redis:7.2",
		"postgres": "postgres:16", "prometheus": "prom/prometheus:v3.5.0", "grafana": "grafana/grafana:12.1.0",
	}
	p := loadCompose(t)
	require.Len(t, p.Services, len(upstream))
	for name, s := range p.Services {
		require.Equal(t, upstream[name], s.Image, name)
	}
	vars := map[string]string{
		"hongbao:dev": "HONGBAO_IMAGE", "redis:7.2": "REDIS_IMAGE", "postgres:16": "POSTGRES_IMAGE",
		"prom/prometheus:v3.5.0": "PROMETHEUS_IMAGE", "grafana/grafana:12.1.0": "GRAFANA_IMAGE",
	}
	env := types.Mapping{}
	for _, v := range vars {
		env[v] = "local/" + strings.ToLower(v)
	}
	p = loadComposeEnv(t, env)
	for name, s := range p.Services {
		require.Equal(t, "local/"+strings.ToLower(vars[upstream[name]]), s.Image, name)
	}
}

// TestComposeRedisSafetyOnEveryNode: both Redis servers run the same start
// and carry the same safety settings whatever their role after a
// failover; the config file lives on each server's volume, so what
// Sentinel rewrote survives a restart, and the first master is named only
// for the first start (no --replicaof on a command line, which would
// override Sentinel's choice at every restart). The sentinels keep their
// rewritten config on a volume too.
func TestComposeRedisSafetyOnEveryNode(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	primary, replica := p.Services["redis-primary"], p.Services["redis-replica"]
	require.Equal(t, primary.Command, replica.Command, "one start script for both")
	cmd := strings.Join(primary.Command, " ")
	for _, want := range []string{"appendonly yes", "appendfsync always", "maxmemory-policy noeviction",
		"min-replicas-to-write 1", "min-replicas-max-lag 10", "requirepass", "masterauth",
		"conf=/data/redis.conf", `[ ! -s "$conf" ]`, "sentinel get-master-addr-by-name hongbao", `redis-server "$conf"`} {
		require.Contains(t, cmd, want)
	}
	require.NotContains(t, cmd, "--replicaof")
	require.NotContains(t, cmd, "--min-replicas", "settings live in the file, not on the command line")
	require.Equal(t, "redis-primary", *replica.Environment["REDIS_FIRST_MASTER"])
	require.NotContains(t, primary.Environment, "REDIS_FIRST_MASTER")
	for _, name := range []string{"redis-primary", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3"} {
		s := p.Services[name]
		require.Len(t, s.Volumes, 1, name)
		require.Equal(t, types.VolumeTypeVolume, s.Volumes[0].Type, name)
		require.Equal(t, name, s.Volumes[0].Source, name)
		require.Equal(t, "/data", s.Volumes[0].Target, name)
		if strings.HasPrefix(name, "redis-") {
			require.Equal(t, name, *s.Environment["REDIS_NAME"], name)
		} else {
			require.Contains(t, strings.Join(s.Command, " "), `[ -s "$conf" ] || cp /etc/redis/sentinel.conf`, name)
		}
	}
}

// TestComposeLoads: the compose file is valid and holds the deployment
// the operations guide describes: two API processes without settlement,
// one scheduler, Redis with a replica and three sentinels, PostgreSQL,
// Prometheus with hongbao's alerts, Grafana with the dashboard; every
// hongbao process reads the sample config file; no secret in an
// environment variable, every secret a file.
func TestComposeLoads(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	require.Equal(t, "hongbao", p.Name)

	var api, sched, sentinels []string
	for name, s := range p.Services {
		cmd := strings.Join(s.Command, " ")
		switch {
		case s.Image == "hongbao:dev" && len(s.Command) > 0 && s.Command[0] == "serve":
			require.Contains(t, cmd, "--settle=false", name)
			api = append(api, name)
		case s.Image == "hongbao:dev" && len(s.Command) > 0 && s.Command[0] == "settle":
			sched = append(sched, name)
		case strings.Contains(cmd, "redis-sentinel"):
			sentinels = append(sentinels, name)
		}
		if s.Image == "hongbao:dev" {
			require.Contains(t, cmd, "--config /etc/hongbao/hongbao.yaml", name)
			require.True(t, slices.ContainsFunc(s.Configs, func(c types.ServiceConfigObjConfig) bool {
				return c.Source == "hongbao" && c.Target == "/etc/hongbao/hongbao.yaml"
			}), "%s mounts the config file", name)
			require.Contains(t, secretNames(s), "pgpass", name)
		}
		for k := range s.Environment {
			u := strings.ToUpper(k)
			secretish := strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET") || strings.Contains(u, "TOKEN") || strings.HasSuffix(u, "_KEY")
			require.False(t, secretish && !strings.HasSuffix(u, "_FILE"), "%s: environment variable %s looks like a secret; mount a file", name, k)
		}
	}
	slices.Sort(api)
	require.Equal(t, []string{"api-1", "api-2"}, api)
	require.Equal(t, []string{"scheduler"}, sched)
	require.Len(t, sentinels, 3)
	for _, name := range []string{"redis-primary", "redis-replica", "postgres", "prometheus", "grafana"} {
		require.Contains(t, p.Services, name)
	}
	// Redis requires the password of the secret, read from the file at
	// start (compose's $$ is a shell's $), never written into the file.
	for _, name := range append([]string{"redis-primary", "redis-replica"}, sentinels...) {
		s := p.Services[name]
		require.Contains(t, secretNames(s), "redis_password", name)
		require.Contains(t, strings.Join(s.Command, " "), "$(cat /run/secrets/redis_password)", name)
	}
	require.Contains(t, strings.Join(p.Services["redis-primary"].Command, " "), "requirepass")
	require.Contains(t, secretNames(p.Services["scheduler"]), "redis_password")
	require.Contains(t, secretNames(p.Services["api-1"]), "redis_password")
	require.Contains(t, secretNames(p.Services["api-1"]), "admin_key")
	require.Contains(t, secretNames(p.Services["api-1"]), "token_secret")

	// The files the configs name exist in the repository, the dashboard
	// aside (its own file); the alerts are the checked-in ones.
	for name, c := range p.Configs {
		if name == "dashboard" {
			require.Equal(t, "hongbao.json", filepath.Base(c.File))
			continue
		}
		_, err := os.Stat(c.File)
		require.NoError(t, err, "config %s", name)
	}
	alerts, err := filepath.Abs("prometheus/alerts.yml")
	require.NoError(t, err)
	require.Equal(t, alerts, p.Configs["alerts"].File)
	cfg, err := filepath.Abs("hongbao.yaml")
	require.NoError(t, err)
	require.Equal(t, cfg, p.Configs["hongbao"].File)

	// The secrets are files, and make-secrets.sh makes each of them.
	script, err := os.ReadFile("compose/make-secrets.sh")
	require.NoError(t, err)
	for name, s := range p.Secrets {
		require.NotEmpty(t, s.File, "secret %s is a file", name)
		require.Empty(t, s.Environment, "secret %s comes from no environment variable", name)
		require.Contains(t, string(script), "put "+name+" ", "make-secrets.sh makes %s", name)
	}

	// Only the host's loopback is published.
	for name, s := range p.Services {
		for _, port := range s.Ports {
			require.Equal(t, "127.0.0.1", port.HostIP, "%s publishes %s", name, port.Published)
		}
	}
}

func secretNames(s types.ServiceConfig) []string {
	var out []string
	for _, sec := range s.Secrets {
		out = append(out, sec.Source)
	}
	return out
}

// TestComposeScrapesEveryProcess: Prometheus scrapes the metrics listener
// of every hongbao process, the API processes and the scheduler alike
// (each exports the metrics of its own duties; without the scheduler's,
// the settlement counters and the lease have no source and the alerts on
// them are blind), starts after them, and loads the alerts; the config
// file gives both commands their listener on the scraped port.
func TestComposeScrapesEveryProcess(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	b, err := os.ReadFile("compose/prometheus.yml")
	require.NoError(t, err)
	var prom struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &prom))
	require.Equal(t, []string{"/etc/prometheus/alerts.yml"}, prom.RuleFiles)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	var hongbao []string
	for name, s := range p.Services {
		if s.Image == "hongbao:dev" {
			hongbao = append(hongbao, name)
			require.Contains(t, targets, name+":9090", "Prometheus scrapes %s", name)
			require.Contains(t, p.Services["prometheus"].DependsOn, name)
		}
	}
	require.Len(t, hongbao, 3)

	b, err = os.ReadFile("hongbao.yaml")
	require.NoError(t, err)
	var cfg struct {
		Serve  map[string]any `json:"serve"`
		Settle map[string]any `json:"settle"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	require.Equal(t, "0.0.0.0:9090", cfg.Serve["metrics-listen"])
	require.Equal(t, "0.0.0.0:9090", cfg.Settle["metrics-listen"])
}

// TestComposeHealthAndStop: every hongbao service has a health check that
// the image can run (its own binary at the path the Dockerfile puts it,
// hongbao healthcheck: scratch has no curl) on its readiness (serve's
// /readyz) or its liveness (settle's /healthz on its metrics port); the
// services that read Redis at start wait for it to be healthy; and
// compose's stop_grace_period outlasts serve's shutdown-delay plus
// shutdown-timeout from the sample config, so a stop never kills a
// draining process.
func TestComposeHealthAndStop(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	df, err := os.ReadFile("docker/Dockerfile")
	require.NoError(t, err)
	require.Contains(t, string(df), "COPY hongbao /usr/local/bin/hongbao")

	b, err := os.ReadFile("hongbao.yaml")
	require.NoError(t, err)
	var cfg struct {
		Serve map[string]any `json:"serve"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	delay, err := time.ParseDuration(cfg.Serve["shutdown-delay"].(string))
	require.NoError(t, err)
	drain, err := time.ParseDuration(cfg.Serve["shutdown-timeout"].(string))
	require.NoError(t, err)
	require.Positive(t, delay, "the sample config sets a shutdown delay")

	for name, s := range p.Services {
		if s.Image != "hongbao:dev" {
			continue
		}
		want := "http://127.0.0.1:8080/readyz"
		if s.Command[0] == "settle" {
			want = "http://127.0.0.1:9090/healthz"
		}
		hc := s.HealthCheck
		require.NotNil(t, hc, "%s has a health check", name)
		require.Equal(t, []string{"CMD", "/usr/local/bin/hongbao", "healthcheck", "--timeout", "2s", want}, []string(hc.Test), name)
		require.Greater(t, time.Duration(*hc.Timeout), 2*time.Second, "%s: docker's timeout outlasts the command's", name)
		require.NotNil(t, s.StopGracePeriod, name)
		require.Greater(t, time.Duration(*s.StopGracePeriod), delay+drain, "%s: stop_grace_period", name)
		require.Equal(t, types.ServiceConditionHealthy, s.DependsOn["redis-primary"].Condition, name)
		require.Equal(t, types.ServiceConditionHealthy, s.DependsOn["postgres"].Condition, name)
	}
	for _, name := range []string{"redis-primary", "redis-replica"} {
		require.NotNil(t, p.Services[name].HealthCheck, name)
	}
}
