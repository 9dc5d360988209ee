package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

const chartDir = "kubernetes/hongbao"

// render renders the chart as helm install would, with vals over the
// chart's values, and returns the objects by template, each as JSON.
func render(t *testing.T, vals map[string]any) map[string][]map[string]any {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: "hb", Namespace: "payments", IsInstall: true, Revision: 1,
	}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	out, err := engine.Render(ch, rv)
	require.NoError(t, err)
	objs := map[string][]map[string]any{}
	for name, text := range out {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "%s:\n%s", name, doc)
			if o != nil {
				objs[filepath.Base(name)] = append(objs[filepath.Base(name)], o)
			}
		}
	}
	return objs
}

// k8sSchemas are the Kubernetes API's schemas, loaded on first use.
var k8sSchemas struct {
	once  sync.Once
	err   error
	byGVK map[string]string // "group/version/Kind" -> definition

	mu       sync.Mutex // the compiler is not safe for concurrent use
	c        *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// schemaOf returns the compiled schema of the definition def.
func schemaOf(t *testing.T, def string) *jsonschema.Schema {
	t.Helper()
	k8sSchemas.once.Do(func() { k8sSchemas.err = loadSchemas() })
	require.NoError(t, k8sSchemas.err)
	k8sSchemas.mu.Lock()
	defer k8sSchemas.mu.Unlock()
	if s, ok := k8sSchemas.compiled[def]; ok {
		return s
	}
	s, err := k8sSchemas.c.Compile("k8s.json#/definitions/" + def)
	require.NoError(t, err)
	k8sSchemas.compiled[def] = s
	return s
}

// swaggerPath finds the Kubernetes OpenAPI (v2) document that the
// k8s.io/kube-openapi module carries as test data, in the module cache
// (downloaded from the Go module proxy like any module).
func swaggerPath() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kube-openapi").Output()
	if err != nil {
		return "", fmt.Errorf("go mod download k8s.io/kube-openapi: %w", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	return filepath.Join(m.Dir, "pkg", "schemaconv", "testdata", "swagger.json"), nil
}

// loadSchemas compiles the definitions of the Kubernetes OpenAPI document
// as JSON schemas, as kubeconform does in its strict mode: an object with
// declared properties admits no other (a misspelt field is an error), an
// int-or-string takes either, a quantity a string or a number.
func loadSchemas() error {
	p, err := swaggerPath()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var doc struct {
		Info        map[string]any            `json:"info"`
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	byGVK := map[string]string{}
	for name, d := range doc.Definitions {
		strict(d)
		gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m := g.(map[string]any)
			byGVK[fmt.Sprintf("%s/%s/%s", m["group"], m["version"], m["kind"])] = name
		}
	}
	doc.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = map[string]any{
		"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	doc.Definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{
		"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("k8s.json", map[string]any{"definitions": anyMap(doc.Definitions)}); err != nil {
		return err
	}
	k8sSchemas.c, k8sSchemas.byGVK = c, byGVK
	k8sSchemas.compiled = map[string]*jsonschema.Schema{}
	return nil
}

func anyMap(m map[string]map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// strict closes every object schema with properties to other fields.
func strict(v any) {
	switch s := v.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			if _, ok := s["additionalProperties"]; !ok {
				s["additionalProperties"] = false
			}
		}
		for _, x := range s {
			strict(x)
		}
	case []any:
		for _, x := range s {
			strict(x)
		}
	}
}

// validate validates o against its kind's schema. Kinds the API does not
// define (a CRD's) only need apiVersion, kind and metadata.name.
func validate(t *testing.T, o map[string]any) (checked bool) {
	t.Helper()
	k8sSchemas.once.Do(func() { k8sSchemas.err = loadSchemas() })
	require.NoError(t, k8sSchemas.err)
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	def, ok := k8sSchemas.byGVK[group+"/"+version+"/"+kind]
	if !ok {
		require.NotEmpty(t, kind)
		require.NotEmpty(t, o["metadata"].(map[string]any)["name"])
		return false
	}
	sch := schemaOf(t, def)
	// Round-trip through JSON: the validator takes JSON's types.
	b, err := json.Marshal(o)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(inst), "%s %v", kind, o["metadata"])
	return true
}

// kinds lists the kinds rendered, sorted, as "Kind/name".
func kinds(objs map[string][]map[string]any) []string {
	var out []string
	for _, os := range objs {
		for _, o := range os {
			out = append(out, fmt.Sprintf("%s/%s", o["kind"], o["metadata"].(map[string]any)["name"]))
		}
	}
	sort.Strings(out)
	return out
}

// find returns the object of kind and name.
func find(t *testing.T, objs map[string][]map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, os := range objs {
		for _, o := range os {
			if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
				return o
			}
		}
	}
	t.Fatalf("no %s/%s in %v", kind, name, kinds(objs))
	return nil
}

// dig follows keys (strings) and indexes (ints) into o.
func dig(t *testing.T, o any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			require.True(t, ok, "at %v", p)
			o = m[k]
		case int:
			s, ok := o.([]any)
			require.True(t, ok, "at %v", p)
			require.Less(t, k, len(s))
			o = s[k]
		}
	}
	return o
}

// TestChartDefaults: with its default values the chart renders the API
// Deployment (probes on /readyz and /healthz, requests set, non-root, the
// config and the secrets as files), the scheduler Deployment running
// settle, the ConfigMap, the Service and the two PodDisruptionBudgets, no
// ServiceMonitor; every object validates against the Kubernetes schemas.
func TestChartDefaults(t *testing.T) {
	t.Parallel()
	objs := render(t, nil)
	require.Equal(t, []string{
		"ConfigMap/hb-hongbao", "Deployment/hb-hongbao-api", "Deployment/hb-hongbao-scheduler",
		"PodDisruptionBudget/hb-hongbao-api", "PodDisruptionBudget/hb-hongbao-scheduler", "Service/hb-hongbao",
	}, kinds(objs))
	for _, os := range objs {
		for _, o := range os {
			require.True(t, validate(t, o), "%s has a schema", o["kind"])
		}
	}

	api := find(t, objs, "Deployment", "hb-hongbao-api")
	c := dig(t, api, "spec", "template", "spec", "containers", 0)
	require.Equal(t, []any{"serve", "--config", "/etc/hongbao/hongbao.yaml"}, dig(t, c, "args"))
	require.Equal(t, "/readyz", dig(t, c, "readinessProbe", "httpGet", "path"))
	require.Equal(t, "/healthz", dig(t, c, "livenessProbe", "httpGet", "path"))
	require.Equal(t, "1", dig(t, c, "resources", "requests", "cpu"))
	require.Equal(t, "512Mi", dig(t, c, "resources", "requests", "memory"))
	require.Equal(t, map[string]any{"name": "GOMEMLIMIT", "value": "400MiB"}, dig(t, c, "env", 0))
	require.Equal(t, true, dig(t, api, "spec", "template", "spec", "securityContext", "runAsNonRoot"))
	require.EqualValues(t, 65532, dig(t, api, "spec", "template", "spec", "securityContext", "runAsUser"))
	require.Equal(t, "hongbao", dig(t, api, "spec", "template", "spec", "volumes", 1, "secret", "secretName"))

	sched := find(t, objs, "Deployment", "hb-hongbao-scheduler")
	sc := dig(t, sched, "spec", "template", "spec", "containers", 0)
	require.Equal(t, []any{"settle", "--config", "/etc/hongbao/hongbao.yaml"}, dig(t, sc, "args"))
	// The scheduler exports its own duties' metrics, on the metrics port,
	// and is probed there.
	require.Equal(t, "metrics", dig(t, sc, "ports", 0, "name"))
	require.EqualValues(t, 9090, dig(t, sc, "ports", 0, "containerPort"))
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		require.Equal(t, "/healthz", dig(t, sc, probe, "httpGet", "path"), probe)
		require.Equal(t, "metrics", dig(t, sc, probe, "httpGet", "port"), probe)
	}

	// The config file the pods read: the chart's settings over the
	// values', secrets as paths only.
	cm := find(t, objs, "ConfigMap", "hb-hongbao")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(dig(t, cm, "data", "hongbao.yaml").(string)), &cfg))
	require.Equal(t, false, dig(t, cfg, "serve", "settle"))
	require.Equal(t, "0.0.0.0:8080", dig(t, cfg, "serve", "listen"))
	require.Equal(t, "/run/secrets/hongbao/admin_key", dig(t, cfg, "serve", "admin-key-file"))
	require.Equal(t, "/run/secrets/hongbao/token_secret", dig(t, cfg, "serve", "token-secret-file"))
	// One receipt key for every API pod, from the Secret (a generated one
	// would differ per pod and change at every start).
	require.Equal(t, "/run/secrets/hongbao/receipt_key", dig(t, cfg, "serve", "receipt-key-file"))
	require.Contains(t, cfg["ledger"], "passfile=/run/secrets/hongbao/pgpass")
	require.EqualValues(t, 1, cfg["wait-replicas"])
	require.Equal(t, "168h", dig(t, cfg, "settle", "retention"))
	require.Equal(t, "0.0.0.0:9090", dig(t, cfg, "settle", "metrics-listen"))
	require.Equal(t, "0.0.0.0:9090", dig(t, cfg, "serve", "metrics-listen"))
	require.NotContains(t, cfg, "redis-password-file")

	pdb := find(t, objs, "PodDisruptionBudget", "hb-hongbao-api")
	require.EqualValues(t, 2, dig(t, pdb, "spec", "minAvailable"))
}

// TestChartRollout: an API pod leaves a rolling update without refused
// connections: its readiness probe is /readyz (503 from SIGTERM on, for
// the config's shutdown-delay, while serve still serves), answered
// within the probe's timeout; liveness is /healthz, which reads no
// dependency; no preStop hook (serve waits itself; the image has no
// sleep); and the pod's grace period outlasts shutdown-delay plus
// shutdown-timeout. The scheduler is probed on its metrics port.
func TestChartRollout(t *testing.T) {
	t.Parallel()
	objs := render(t, nil)
	api := find(t, objs, "Deployment", "hb-hongbao-api")
	c := dig(t, api, "spec", "template", "spec", "containers", 0).(map[string]any)
	require.Equal(t, "/readyz", dig(t, c, "readinessProbe", "httpGet", "path"))
	require.Equal(t, "http", dig(t, c, "readinessProbe", "httpGet", "port"))
	require.GreaterOrEqual(t, dig(t, c, "readinessProbe", "timeoutSeconds"), 2.0, "/readyz answers within about a second")
	require.Equal(t, "/healthz", dig(t, c, "livenessProbe", "httpGet", "path"))
	require.NotContains(t, c, "lifecycle", "no preStop: serve's --shutdown-delay is the wait")

	cm := find(t, objs, "ConfigMap", "hb-hongbao")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(dig(t, cm, "data", "hongbao.yaml").(string)), &cfg))
	delay, err := time.ParseDuration(dig(t, cfg, "serve", "shutdown-delay").(string))
	require.NoError(t, err)
	drain, err := time.ParseDuration(dig(t, cfg, "serve", "shutdown-timeout").(string))
	require.NoError(t, err)
	require.Positive(t, delay)
	// Long enough for the probe to fail (period x threshold) before the
	// listener closes.
	probe := time.Duration(dig(t, c, "readinessProbe", "periodSeconds").(float64)*dig(t, c, "readinessProbe", "failureThreshold").(float64)) * time.Second
	require.GreaterOrEqual(t, delay, probe, "shutdown-delay covers the readiness probe's failing")
	grace := time.Duration(dig(t, api, "spec", "template", "spec", "terminationGracePeriodSeconds").(float64)) * time.Second
	require.Greater(t, grace, delay+drain, "terminationGracePeriodSeconds")

	sched := find(t, objs, "Deployment", "hb-hongbao-scheduler")
	sc := dig(t, sched, "spec", "template", "spec", "containers", 0)
	require.Equal(t, "/healthz", dig(t, sc, "livenessProbe", "httpGet", "path"))
}

// TestChartValues: a second set of values (more replicas, the
// ServiceMonitor on, other resources, a NodePort, placement, no payment
// key) renders valid objects too, with the values in them.
func TestChartValues(t *testing.T) {
	t.Parallel()
	objs := render(t, map[string]any{
		"image":   map[string]any{"repository": "registry.example/hongbao", "tag": "1.2.3"},
		"redis":   map[string]any{"url": "redis://redis-0.redis:6379"},
		"secret":  map[string]any{"name": "hongbao-prod", "paymentKey": "", "redisPassword": "redis_password"},
		"service": map[string]any{"type": "NodePort", "port": 8000, "metricsPort": 9000},
		"serve": map[string]any{
			"replicas":            6,
			"resources":           map[string]any{"requests": map[string]any{"cpu": "2", "memory": "256Mi"}, "limits": map[string]any{"memory": "1Gi"}},
			"podDisruptionBudget": map[string]any{"maxUnavailable": "25%"},
			"nodeSelector":        map[string]any{"pool": "api"},
			"tolerations":         []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "api", "effect": "NoSchedule"}},
		},
		"config":         map[string]any{"wait-replicas": 2, "serve": map[string]any{"global-rate": 50000}},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
	})
	checked := 0
	for _, os := range objs {
		for _, o := range os {
			if validate(t, o) {
				checked++
			}
		}
	}
	require.Equal(t, 6, checked, "every object but the ServiceMonitor and the PodMonitor (CRDs) has a schema")
	sm := find(t, objs, "ServiceMonitor", "hb-hongbao")
	require.Equal(t, "metrics", dig(t, sm, "spec", "endpoints", 0, "port"))
	// The scheduler has no Service: its pods are scraped as pods, on the
	// port its container names metrics.
	pm := find(t, objs, "PodMonitor", "hb-hongbao-scheduler")
	require.Equal(t, "metrics", dig(t, pm, "spec", "podMetricsEndpoints", 0, "port"))
	require.Equal(t, "scheduler", dig(t, pm, "spec", "selector", "matchLabels", "app.kubernetes.io/component"))
	require.Equal(t, "prom", dig(t, pm, "metadata", "labels", "release"))
	sched := find(t, objs, "Deployment", "hb-hongbao-scheduler")
	require.EqualValues(t, 9000, dig(t, sched, "spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"))

	api := find(t, objs, "Deployment", "hb-hongbao-api")
	require.EqualValues(t, 6, dig(t, api, "spec", "replicas"))
	c := dig(t, api, "spec", "template", "spec", "containers", 0)
	require.Equal(t, "registry.example/hongbao:1.2.3", dig(t, c, "image"))
	require.EqualValues(t, 8000, dig(t, c, "ports", 0, "containerPort"))
	require.Equal(t, "api", dig(t, api, "spec", "template", "spec", "nodeSelector", "pool"))
	pdb := find(t, objs, "PodDisruptionBudget", "hb-hongbao-api")
	require.Equal(t, "25%", dig(t, pdb, "spec", "maxUnavailable"))
	require.Nil(t, dig(t, pdb, "spec", "minAvailable"), "the values' budget replaces the default")

	var cfg map[string]any
	cm := find(t, objs, "ConfigMap", "hb-hongbao")
	require.NoError(t, yaml.Unmarshal([]byte(dig(t, cm, "data", "hongbao.yaml").(string)), &cfg))
	require.EqualValues(t, 2, cfg["wait-replicas"])
	require.EqualValues(t, 50000, dig(t, cfg, "serve", "global-rate"))
	require.Equal(t, "0.0.0.0:8000", dig(t, cfg, "serve", "listen"))
	require.Equal(t, "0.0.0.0:9000", dig(t, cfg, "settle", "metrics-listen"))
	require.NotContains(t, cfg["serve"], "payment-key-file")
	require.Equal(t, "/run/secrets/hongbao/redis_password", cfg["redis-password-file"])
}

// TestChartRefusesPasswords: a password in the Redis URL or the ledger
// DSN would be written into the ConfigMap: rendering fails.
func TestChartRefusesPasswords(t *testing.T) {
	t.Parallel()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	for _, vals := range []map[string]any{
		{"redis": map[string]any{"url": "redis://:hunter2-hunter2@redis:6379"}},
		{"ledger": map[string]any{"dsn": "postgres://hongbao:hunter2@postgres/hongbao"}},
	} {
		rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "hb", Namespace: "x", IsInstall: true}, chartutil.DefaultCapabilities)
		require.NoError(t, err)
		_, err = engine.Render(ch, rv)
		require.ErrorContains(t, err, "holds a password")
	}
}

// TestChartDashboard: with grafanaDashboard.enabled the chart carries the
// dashboard, deploy/grafana/hongbao.json through its link, in a ConfigMap
// for Grafana's sidecar; without the file it refuses to render rather than
// ship an empty one.
func TestChartDashboard(t *testing.T) {
	t.Parallel()
	on := map[string]any{"grafanaDashboard": map[string]any{"enabled": true}}
	dash, err := os.ReadFile("grafana/hongbao.json")
	require.NoError(t, err)
	objs := render(t, on)
	cm := find(t, objs, "ConfigMap", "hb-hongbao-dashboard")
	require.True(t, validate(t, cm))
	require.Equal(t, "1", dig(t, cm, "metadata", "labels", "grafana_dashboard"))
	require.JSONEq(t, string(dash), dig(t, cm, "data", "hongbao.json").(string))
	require.NotContains(t, kinds(render(t, nil)), "ConfigMap/hb-hongbao-dashboard", "off by default")

	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	ch.Files = slices.DeleteFunc(ch.Files, func(f *chart.File) bool { return f.Name == "dashboards/hongbao.json" })
	rv, err := chartutil.ToRenderValues(ch, on, chartutil.ReleaseOptions{Name: "hb", Namespace: "x", IsInstall: true}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	_, err = engine.Render(ch, rv)
	require.ErrorContains(t, err, "the chart has no dashboards/hongbao.json")
}

// TestChartLint: helm lint finds nothing to say.
func TestChartLint(t *testing.T) {
	t.Parallel()
	l := lint.All(chartDir, nil, "payments", false)
	for _, m := range l.Messages {
		require.Less(t, m.Severity, support.WarningSev, "%s", m)
	}
}

// TestSchemasCatchMistakes: the validation can fail: a misspelt field, a
// field of the wrong type and a missing required field are each refused.
func TestSchemasCatchMistakes(t *testing.T) {
	t.Parallel()
	good := func() map[string]any {
		objs := render(t, nil)
		return find(t, objs, "Deployment", "hb-hongbao-api")
	}
	sch := schemaOf(t, "io.k8s.api.apps.v1.Deployment")
	check := func(o map[string]any) error {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err)
		return sch.Validate(inst)
	}
	require.NoError(t, check(good()))
	o := good()
	o["spec"].(map[string]any)["replicass"] = 3
	require.Error(t, check(o), "a misspelt field")
	o = good()
	o["spec"].(map[string]any)["replicas"] = "three"
	require.Error(t, check(o), "a string for an integer")
	o = good()
	delete(o["spec"].(map[string]any), "selector")
	require.Error(t, check(o), "no selector")
	o = good()
	c := dig(t, o, "spec", "template", "spec", "containers", 0).(map[string]any)
	c["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["port"] = 8080.5
	require.Error(t, check(o), "a port neither a name nor an integer")
}
