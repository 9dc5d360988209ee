package cli

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestVersion: hongbao version, hongbao --version and every command's
// --version print this build's version and exit 0, before anything else
// is checked; HONGBAO_VERSION, a common name for a deployment's own
// variable, is not read as --version.
func TestVersion(t *testing.T) {
	t.Parallel()
	want := "hongbao " + readBuildInfo().Version + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"settle", "--version"},
		{"race", "--version"}, {"campaign", "--version"}, {"owner", "x", "--version"}, {"bench", "--mode", "http", "--version"}} {
		code, out, errs := run(t, nil, args...)
		require.Equal(t, 0, code, "%v: %s", args, errs)
		require.True(t, strings.HasPrefix(out, want), "%v: %q", args, out)
		require.Contains(t, out, "go       "+runtime.Version(), args)
	}
	code, out, errs := run(t, nil, "version", "--json")
	require.Equal(t, 0, code, errs)
	var b buildInfo
	require.NoError(t, json.Unmarshal([]byte(out), &b))
	require.Equal(t, runtime.Version(), b.GoVersion)

	for _, c := range commands {
		if c.name == "version" {
			continue
		}
		code, out, _ := run(t, map[string]string{"HONGBAO_VERSION": "1.2.3"}, c.name, "--version")
		require.Equal(t, 0, code, c.name)
		require.True(t, strings.HasPrefix(out, want), "hongbao %s --version: %q", c.name, out)
	}
	code, _, errs = run(t, map[string]string{"HONGBAO_VERSION": "1.2.3"}, "settle")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--redis is required", "HONGBAO_VERSION is no --version")
}

// TestBuildInfoOf: what a build stamped from a checkout says: the module
// version, the revision (marked when the tree had changes) and its time,
// in hongbao version and in hongbao_build_info.
func TestBuildInfoOf(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/hongbao/hongbao", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abc"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	b := buildInfoOf(bi)
	require.Equal(t, buildInfo{Version: "v1.4.0", Revision: "0123abc", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.99.1"}, b)
	var out bytes.Buffer
	printVersion(&out, b)
	require.Equal(t, "hongbao v1.4.0\n  revision 0123abc (modified)\n  time     2026-01-02T03:04:05Z\n  go       go1.99.1\n", out.String())

	reg := prometheus.NewRegistry()
	reg.MustRegister(b.collector())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	require.Equal(t, "hongbao_build_info", mfs[0].GetName())
	require.Len(t, mfs[0].GetMetric(), 1)
	got := map[string]string{}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": "v1.4.0", "revision": "0123abc+modified", "goversion": "go1.99.1"}, got)
	require.Equal(t, 1.0, mfs[0].GetMetric()[0].GetGauge().GetValue())

	// Without build information (go run), the version is "(devel)".
	require.Equal(t, buildInfo{Version: "(devel)", GoVersion: runtime.Version()}, buildInfoOf(nil))
}
