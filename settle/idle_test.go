package settle_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

var cmdCalls = regexp.MustCompile(`(?m)^cmdstat_([a-z|_-]+):calls=(\d+)`)

// redisCalls counts the commands r has run, INFO (the count's own) aside.
func redisCalls(t *testing.T, r *testenv.Redis) int64 {
	t.Helper()
	s, err := r.Client.Do(t.Context(), r.Client.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var n int64
	for _, m := range cmdCalls.FindAllStringSubmatch(s, -1) {
		if m[1] != "info" {
			v, _ := strconv.ParseInt(m[2], 10, 64)
			n += v
		}
	}
	return n
}

// TestWorkerIdleBacksOffAndWakes: a worker whose passes find nothing backs
// off from Poll to IdlePoll (a fixed 20ms poll made two calls every 20ms),
// and Wake ends the pause at once, so a woken grant settles well within
// the idle poll (the time it takes is the ledger's).
func TestWorkerIdleBacksOffAndWakes(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	l := openSQLite(t)
	ctx := context.Background()
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "idle", Logger: quiet(),
		Poll: 20 * time.Millisecond, IdlePoll: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	before, start := redisCalls(t, r), time.Now()
	time.Sleep(2 * time.Second) // the measurement itself
	calls, took := redisCalls(t, r)-before, time.Since(start)
	t.Logf("idle worker: %d Redis calls in %s", calls, took.Round(time.Millisecond))
	// The ramp 20+40+...+1280ms: about 7 passes of 2 calls; at a fixed
	// 20ms it would be about 200.
	require.LessOrEqual(t, calls, int64(30))

	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{Total: 100, Count: 2})
	require.NoError(t, err)
	// The worker is in a pause of up to IdlePoll now (a campaign with no
	// grant is no work, so it does not reset the pause).
	_, err = eng.Grab(ctx, c.ID, "u1")
	require.NoError(t, err)
	granted := time.Now()
	w.Wake()
	for {
		tot, err := l.Totals(ctx, c.ID)
		require.NoError(t, err)
		if tot.GrantCount == 1 {
			break
		}
		require.Less(t, time.Since(granted), time.Second, "the woken worker did not settle before its idle poll")
		time.Sleep(time.Millisecond)
	}
	t.Logf("woken: settled %s after the grant", time.Since(granted).Round(time.Millisecond))
}
