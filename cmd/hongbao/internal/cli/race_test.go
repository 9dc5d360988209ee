package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// The race's own checks (the naive side goes wrong, hongbao's does not,
// deaths after a push explain its duplicates) are in package race; these
// tests hold the command's contract: flags, exit status, JSON and table.

// raceJSON decodes the --json output into naive and hongbao field maps,
// checking that it has exactly these two sides.
func raceJSON(t *testing.T, out string) (naive, ours map[string]int64) {
	t.Helper()
	var rep map[string]map[string]int64
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep, 2, out)
	require.Contains(t, rep, "naive")
	require.Contains(t, rep, "hongbao")
	return rep["naive"], rep["hongbao"]
}

func requireAllZero(t *testing.T, side map[string]int64, out string) {
	t.Helper()
	for k, v := range side {
		require.Zero(t, v, "hongbao's %s in %s", k, out)
	}
}

func TestRaceUpdateIfNewerJSON(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "race", "update-if-newer", "--redis", r.Addr,
		"--ops", "2000", "--keys", "20", "--workers", "64", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 2, out)
		require.Contains(t, side, "stale_keys")
		require.Contains(t, side, "aggregate_drift")
	}
	requireAllZero(t, ours, out)
}

func TestRaceOnceJSON(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "race", "once", "--redis", r.Addr,
		"--ops", "1200", "--lease", "1s", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 2, "no after-push fields unless asked: %s", out)
	}
	requireAllZero(t, ours, out)
}

func TestRaceOnceDieAfterPush(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "race", "once", "--redis", r.Addr,
		"--ops", "600", "--lease", "1s", "--die", "0.2", "--die-after-push", "0.2", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 4, out)
	}
	require.Zero(t, ours["duplicates"], out)
	require.Zero(t, ours["lost"], out)
	// What the four figures mean is tested in package race.
	for _, k := range []string{"duplicates", "lost", "after_push_deaths", "after_push_duplicates"} {
		require.Contains(t, naive, k, out)
		require.Contains(t, ours, k, out)
	}
}

// TestRaceCleansGivenRedis: on a Redis given with --redis, the race takes
// its keys away afterwards.
func TestRaceCleansGivenRedis(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	for _, mode := range []string{"update-if-newer", "once"} {
		code, _, errs := run(t, nil, "race", mode, "--redis", r.Addr, "--ops", "300", "--lease", "1s", "--json")
		require.Equal(t, 0, code, errs)
	}
	n, err := r.Client.Do(t.Context(), r.Client.B().Dbsize().Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "keys left behind")
}

func TestRaceTableAndEnv(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	env := map[string]string{"HONGBAO_REDIS": r.Addr, "HONGBAO_OPS": "2000", "HONGBAO_WORKERS": "16", "HONGBAO_KEYS": "10"}
	code, out, errs := run(t, env, "race", "update-if-newer")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "2000 updates of 10 device records")
	require.Contains(t, out, "16 workers per side")
	require.Contains(t, out, "stale keys")
	require.Contains(t, out, "aggregate drift")

	code, out, errs = run(t, env, "race", "once", "--die-after-push", "0.1", "--lease", "1s")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "666 messages, each handed to 3 workers", "--ops 2000 / --copies 3")
	require.Contains(t, out, "duplicates they caused")
}

func TestRaceUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no mode", []string{"race"}, 2, "want a mode"},
		{"unknown mode", []string{"race", "upsert"}, 2, "unknown mode"},
		{"flag before mode", []string{"race", "--json", "once"}, 2, "unknown mode"},
		{"zero workers", []string{"race", "once", "--workers", "0"}, 2, "--workers"},
		{"certain death", []string{"race", "once", "--die", "1"}, 2, "--die"},
		{"deaths add up", []string{"race", "once", "--die", "0.5", "--die-after-push", "0.5"}, 2, "at most 0.9"},
		{"short lease", []string{"race", "once", "--lease", "1ms"}, 2, "--lease"},
		{"stray argument", []string{"race", "once", "extra"}, 2, "unexpected argument"},
		{"help", []string{"race", "-h"}, 0, "Usage: hongbao race"},
		{"help after mode", []string{"race", "once", "-h"}, 0, "Usage: hongbao race"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := run(t, nil, tt.args...)
			require.Equal(t, tt.code, code, errs)
			require.True(t, strings.Contains(errs, tt.msg), "stderr %q lacks %q", errs, tt.msg)
		})
	}
}
