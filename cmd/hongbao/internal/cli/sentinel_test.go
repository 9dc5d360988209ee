package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

// TestCommandsOnSentinel: demo, bench (both designs: the classic one
// dials the master the sentinels name), settle and reconcile take a
// Sentinel URL as --redis, and after a failover the same URL reaches the
// new master.
func TestCommandsOnSentinel(t *testing.T) {
	t.Parallel()
	s := testenv.NewSentinel(t, testenv.SentinelOptions{})
	demo := func() demoReport {
		t.Helper()
		code, out, errs := run(t, nil, "demo", "--redis", s.URL, "--packets", "300", "--users", "500", "--json",
			"--wait-replicas", "1", "--wait-timeout", "2s")
		require.Equal(t, 0, code, errs)
		var rep demoReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.True(t, rep.ReconcileOK, "%v", rep.Problems)
		require.EqualValues(t, 300, rep.Granted)
		return rep
	}
	demo()
	runBenchJSON(t, "--redis", s.URL)

	ctx := context.Background()
	old := s.Master()
	require.NoError(t, s.Failover(ctx))
	now, err := s.WaitFailover(ctx)
	require.NoError(t, err)
	require.NotEqual(t, old, now)
	require.NoError(t, s.WaitReplicated(ctx), "the old master follows the new one")
	rep := demo()
	code, out, errs := run(t, nil, "settle", "--redis", s.URL, "--ledger", "sqlite:"+t.TempDir()+"/l.db", "--drain", "--json")
	require.Equal(t, 0, code, "%s %s", out, errs)
	require.Equal(t, "given", rep.Redis)
}

// TestBenchWithReplica: bench starts a replica of its own server and the
// engine waits for it after every batch.
func TestBenchWithReplica(t *testing.T) {
	t.Parallel()
	testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "bench", "--mode", "engine", "--packets", "2000", "--users", "3000", "--concurrency", "32",
		"--runs", "1", "--replicas", "1", "--wait-replicas", "1", "--json")
	require.Equal(t, 0, code, errs)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	requireBenchResult(t, raw, "engine")
	require.EqualValues(t, 1, raw["replicas"])
	require.EqualValues(t, 1, raw["wait_replicas"])
	code, _, errs = run(t, nil, "bench", "--mode", "engine", "--wait-replicas", "1")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--replicas")
}
