package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

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
		"--ops", "20000", "--keys", "20", "--workers", "64", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 2, out)
		require.Contains(t, side, "stale_keys")
		require.Contains(t, side, "aggregate_drift")
	}
	requireAllZero(t, ours, out)
	require.Positive(t, naive["stale_keys"]+naive["aggregate_drift"], "the naive approach went wrong in the same run: %s", out)
}

func TestRaceOnceJSON(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "race", "once", "--redis", r.Addr,
		"--ops", "6000", "--lease", "200ms", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 2, "no after-push fields unless asked: %s", out)
	}
	requireAllZero(t, ours, out)
	// With 30% of the winners dying between the mark and the push, the
	// naive approach loses messages in every run of this size.
	require.Positive(t, naive["lost"], out)
}

func TestRaceOnceDieAfterPush(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "race", "once", "--redis", r.Addr,
		"--ops", "3000", "--lease", "200ms", "--die", "0.2", "--die-after-push", "0.2", "--json")
	require.Equal(t, 0, code, errs)
	naive, ours := raceJSON(t, out)
	for _, side := range []map[string]int64{naive, ours} {
		require.Len(t, side, 4, out)
	}
	require.Zero(t, ours["duplicates"], out)
	require.Zero(t, ours["lost"], out)
	require.Positive(t, ours["after_push_deaths"], out)
	// Each death after a push causes exactly one more push, once the
	// lease runs out; the receiver removes it by id.
	require.Equal(t, ours["after_push_deaths"], ours["after_push_duplicates"], out)
	require.Zero(t, naive["after_push_duplicates"], "the naive mark comes before the push: %s", out)
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

	code, out, errs = run(t, env, "race", "once", "--die-after-push", "0.1", "--lease", "100ms")
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
