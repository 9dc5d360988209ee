package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

// requireBenchResult checks one mode's JSON object of a small run:
// 2000 packets, 3000 users.
func requireBenchResult(t *testing.T, raw map[string]any, mode string) {
	t.Helper()
	for _, k := range []string{"mode", "grabs", "granted", "seconds", "grabs_per_sec", "grants_per_sec",
		"p50_ms", "p99_ms", "p999_ms", "redis_us_per_grab", "ok", "batch_sizes",
		"redis_bytes_per_pooled_packet", "redis_bytes_per_grant", "peak_rss_mb"} {
		require.Contains(t, raw, k, "%s result", mode)
	}
	require.Equal(t, mode, raw["mode"])
	require.Equal(t, true, raw["ok"], "%s problems: %v", mode, raw["problems"])
	require.EqualValues(t, 2000, raw["granted"], mode)
	if mode == "engine" {
		// Every user grabs once: 2000 GRANTED, 1000 SOLD_OUT.
		require.EqualValues(t, 3000, raw["grabs"])
		require.EqualValues(t, 1000, raw["sold_out"])
	} else {
		// Each worker stops at its first nil (the pool is empty).
		require.GreaterOrEqual(t, raw["grabs"], float64(2000))
		require.LessOrEqual(t, raw["grabs"], float64(2008))
	}
	require.Greater(t, raw["grants_per_sec"], 0.0)
	require.Greater(t, raw["p99_ms"], 0.0)
	require.Greater(t, raw["redis_bytes_per_pooled_packet"], 0.0)
	require.Greater(t, raw["redis_bytes_per_grant"], 0.0)
}

func runBenchJSON(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	code, out, errs := run(t, nil, append([]string{"bench", "--mode", "both", "--packets", "2000", "--users", "3000",
		"--concurrency", "8", "--classic-workers", "3", "--runs", "1", "--json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var pair struct {
		Engine  map[string]any `json:"engine"`
		Classic map[string]any `json:"classic"`
		Ratio   float64        `json:"ratio"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &pair), out)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one JSON line and nothing else on stdout")
	requireBenchResult(t, pair.Engine, "engine")
	requireBenchResult(t, pair.Classic, "classic")
	// Each design runs at its own concurrency: the engine's users in
	// flight, the classic design's workers.
	require.EqualValues(t, 8, pair.Engine["concurrency"])
	require.EqualValues(t, 3, pair.Classic["concurrency"])
	require.Greater(t, pair.Ratio, 0.0)
	return map[string]map[string]any{"engine": pair.Engine, "classic": pair.Classic}
}

// TestBenchSharedRedis runs both designs on the shared test Redis, where
// other tests run too: keys of their own, and CPU per grant flagged.
func TestBenchSharedRedis(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	res := runBenchJSON(t, "--redis", r.Addr)
	for _, m := range res {
		require.Equal(t, "given", m["redis"])
		require.Equal(t, false, m["redis_cpu_reliable"])
		require.NotEmpty(t, m["notes"])
	}
	// Nothing is left behind on a shared Redis.
	for _, pattern := range []string{"bench:classic:*", "hb:{c:bench-*"} {
		keys, err := r.Client.Do(t.Context(), r.Client.B().Keys().Pattern(pattern).Build()).AsStrSlice()
		require.NoError(t, err)
		require.Empty(t, keys, pattern)
	}
}

// TestBenchOwnRedis lets the bench start its own redis-servers.
func TestBenchOwnRedis(t *testing.T) {
	t.Parallel()
	testenv.SharedRedis(t) // skips without redis-server
	res := runBenchJSON(t, "--aof", "always", "--pin=false")
	for _, m := range res {
		require.Equal(t, "own", m["redis"])
		require.Equal(t, "always", m["aof"])
		require.Equal(t, true, m["redis_cpu_reliable"])
	}
}

// TestBenchSweepSVG is not parallel: it would leave keys on the shared
// Redis for a moment while TestBenchSharedRedis checks that none are left.
func TestBenchSweepSVG(t *testing.T) {
	r := testenv.SharedRedis(t)
	svg := filepath.Join(t.TempDir(), "docs", "sweep.svg")
	code, out, errs := run(t, nil, "bench", "--redis", r.Addr, "--packets", "500", "--users", "500",
		"--sweep", "2,8", "--svg", svg)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "| concurrency |")
	require.Contains(t, out, "| 8 |")
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	// Well-formed XML with both panels and both lines.
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); err != nil {
			require.ErrorContains(t, err, "EOF")
			break
		}
	}
	require.Contains(t, string(b), "Throughput")
	require.Contains(t, string(b), "p99 latency")
	require.Equal(t, 4, strings.Count(string(b), "<polyline"))
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--mode", "fast"},
		{"--aof", "sometimes"},
		{"--runs", "0"},
		{"--packets", "0"},
		{"--concurrency", "0"},
		{"--classic-workers", "0"},
		{"--mode", "classic", "--concurrency", "64"},
		{"--sweep", "8,16", "--concurrency", "64"},
		{"--sweep", "8,16", "--classic-workers", "64"},
		{"--svg", "x.svg"},
		{"--sweep", "8,x"},
		{"--total", "1.234"},
		{"--redis", "127.0.0.1:1", "--aof", "always"},
	} {
		code, _, errs := run(t, nil, append([]string{"bench"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
	}
}
