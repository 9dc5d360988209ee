package race

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// small is a workload that runs in a second and still shows the naive
// approaches going wrong.
func small() Config {
	return Config{Workers: 64, Ops: 20000, Keys: 20, Copies: 3, Die: 0.3, Lease: time.Second, Seed: 7}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*Config)
		msg  string // "" when valid
	}{
		{"the default", func(*Config) {}, ""},
		{"no workers", func(c *Config) { c.Workers = 0 }, "--workers must be in 1..4096"},
		{"too many ops", func(c *Config) { c.Ops = 10_000_001 }, "--ops"},
		{"no keys", func(c *Config) { c.Keys = 0 }, "--keys"},
		{"too many copies", func(c *Config) { c.Copies = 65 }, "--copies"},
		{"certain death", func(c *Config) { c.Die = 1 }, "--die must be a probability"},
		{"negative death", func(c *Config) { c.DieAfterPush = -0.1 }, "--die-after-push"},
		{"not a number", func(c *Config) { c.Die = math.NaN() }, "--die"},
		{"deaths add up", func(c *Config) { c.Die, c.DieAfterPush = 0.5, 0.5 }, "at most 0.9"},
		{"short lease", func(c *Config) { c.Lease = time.Millisecond }, "--lease"},
		{"long lease", func(c *Config) { c.Lease = 2 * time.Minute }, "--lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := small()
			tt.edit(&c)
			err := c.Validate()
			if tt.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.msg)
		})
	}
}

// TestUpdate: hongbao's side keeps every record at its newest version and
// the summary equal to a recount; the naive side, in the same run, does
// not.
func TestUpdate(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	naive, ours, err := Update(t.Context(), r.Client, NewPrefix(), small())
	require.NoError(t, err)
	require.Zero(t, ours, "hongbao's side")
	require.Positive(t, naive.StaleKeys+naive.AggregateDrift, "the naive side went right: %+v", naive)
}

// TestOnce: hongbao's side pushes every message exactly once although 30%
// of the winning workers die before pushing; the naive side loses some.
func TestOnce(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	cfg := small()
	cfg.Ops = 6000
	naive, ours, err := Once(t.Context(), r.Client, NewPrefix(), cfg)
	require.NoError(t, err)
	require.Equal(t, OnceSide{}, ours)
	require.Positive(t, naive.Lost, "%+v", naive)
	require.Nil(t, naive.AfterPushDeaths, "no after-push figures unless asked")
}

// TestOnceDieAfterPush: each death after a push causes exactly one more
// push on hongbao's side, once the lease runs out, and nothing else does.
func TestOnceDieAfterPush(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	cfg := small()
	cfg.Ops, cfg.Die, cfg.DieAfterPush = 3000, 0.2, 0.2
	// A lease of a second: a push counts as caused by a death when it comes half
	// a lease after it, far beyond a naive race's round trip even on a
	// loaded machine.
	cfg.Lease = time.Second
	naive, ours, err := Once(t.Context(), r.Client, NewPrefix(), cfg)
	require.NoError(t, err)
	require.Zero(t, ours.Duplicates)
	require.Zero(t, ours.Lost)
	require.NotNil(t, ours.AfterPushDeaths)
	require.Positive(t, *ours.AfterPushDeaths)
	require.Equal(t, *ours.AfterPushDeaths, *ours.AfterPushDuplicates)
	// The naive mark comes before the push, so its duplicates come from
	// the check-then-mark race, within a round trip, not from deaths. A
	// worker stalled for half a lease (a loaded machine under -race) can
	// still have one counted as caused; a handful among hundreds.
	require.LessOrEqual(t, *naive.AfterPushDuplicates*20, *ours.AfterPushDuplicates,
		"the naive design's duplicates are not caused by deaths after the push")
}

// TestWorkOrder: every message is handed out Copies times, in rounds of
// Keys messages.
func TestWorkOrder(t *testing.T) {
	t.Parallel()
	cfg := Config{Keys: 4, Copies: 3, Seed: 1}
	order := workOrder(cfg, 10)
	require.Len(t, order, 30)
	count := map[int32]int{}
	for i, m := range order {
		count[m]++
		round := i / (cfg.Keys * cfg.Copies)
		require.Equal(t, round, int(m)/cfg.Keys, "message %d outside its round at %d", m, i)
	}
	for m := range int32(10) {
		require.Equal(t, 3, count[m], "message %d", m)
	}
}

// TestReceiverSide: lost and duplicated messages are counted, and a
// duplicate is explained by an after-push death only when it comes at
// least half a lease after it.
func TestReceiverSide(t *testing.T) {
	t.Parallel()
	r := newReceiver(4, time.Hour)
	r.push(0) // once: fine
	r.push(1) // twice, no death: a duplicate
	r.push(1)
	r.push(2) // pushed, its worker died, pushed again at once: not explained
	r.diedAfterPush(2)
	r.push(2)
	// message 3: never pushed
	s := r.side(true)
	require.EqualValues(t, 1, s.Lost)
	require.EqualValues(t, 2, s.Duplicates)
	require.EqualValues(t, 1, *s.AfterPushDeaths)
	require.Zero(t, *s.AfterPushDuplicates)

	r = newReceiver(1, 0) // a zero lease: any later push is explained
	r.push(0)
	r.diedAfterPush(0)
	r.push(0)
	s = r.side(false)
	require.Zero(t, s.Duplicates)
	require.Nil(t, s.AfterPushDeaths)
}

// TestCleanup deletes a run's keys and nothing else.
func TestCleanup(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	c, ctx := r.Client, context.Background()
	prefix, other := NewPrefix(), NewPrefix()
	require.True(t, strings.HasPrefix(prefix, "hb:race:"))
	require.NotEqual(t, prefix, other)
	for i := range 2500 {
		require.NoError(t, c.Do(ctx, c.B().Set().Key(prefix+"k"+strconv.Itoa(i)).Value("1").Build()).Error())
	}
	require.NoError(t, c.Do(ctx, c.B().Set().Key(other+"keep").Value("1").Build()).Error())
	Cleanup(ctx, c, prefix)
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Empty(t, keys)
	n, err := c.Do(ctx, c.B().Exists().Key(other+"keep").Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(other+"keep").Build()).Error())
}
