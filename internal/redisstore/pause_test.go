package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestPauseRefusesAnOlderGeneration: pause.lua applies a call's write
// only if its generation is newer than the last one the shard took, so a
// late write of an older call changes nothing; the generations grow.
func TestPauseRefusesAnOlderGeneration(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	k := newDiscountShard(t, s, []int64{100, 200}).Keys()

	older, err := s.PauseGen(ctx, k, 0)
	require.NoError(t, err)
	newer, err := s.PauseGen(ctx, k, 0)
	require.NoError(t, err)
	require.Greater(t, newer, older)

	p, err := s.Pause(ctx, k, true, newer)
	require.NoError(t, err)
	require.Equal(t, redisstore.PauseReply{State: "open", Paused: true, Changed: true, Applied: true, Newest: newer}, p)

	p, err = s.Pause(ctx, k, false, older)
	require.NoError(t, err)
	require.Equal(t, redisstore.PauseReply{State: "open", Paused: true, Newest: newer}, p, "the older resume is refused")
	p, err = s.Pause(ctx, k, true, newer)
	require.NoError(t, err)
	require.Equal(t, redisstore.PauseReply{State: "open", Paused: true, Newest: newer}, p, "a repeat of the same generation writes nothing")
	m, err := r.Client.Do(ctx, r.Client.B().Hmget().Key(k.Meta).Field("paused", "pause_applied").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, m)

	// A newer call that finds the flag as it wants still records its
	// generation, so an older one cannot undo it afterwards.
	third, err := s.PauseGen(ctx, k, 0)
	require.NoError(t, err)
	p, err = s.Pause(ctx, k, true, third)
	require.NoError(t, err)
	require.Equal(t, redisstore.PauseReply{State: "open", Paused: true, Applied: true, Newest: third}, p)
	p, err = s.Pause(ctx, k, false, newer)
	require.NoError(t, err)
	require.False(t, p.Applied)
	require.True(t, p.Paused)

	// A counter behind the shards' (a root rebuilt without its meta) is
	// lifted above the newest a shard answered.
	lifted, err := s.PauseGen(ctx, k, 100)
	require.NoError(t, err)
	require.EqualValues(t, 101, lifted)
	next, err := s.PauseGen(ctx, k, 5)
	require.NoError(t, err)
	require.EqualValues(t, 102, next, "a counter above it just grows")

	_, err = s.Pause(ctx, k, true, 0)
	require.ErrorIs(t, err, redisstore.ErrArgs, "a generation is positive")
	_, err = s.PauseGen(ctx, k, -1)
	require.ErrorIs(t, err, redisstore.ErrArgs)
	_, err = s.PauseGen(ctx, redisstore.Default.DiscountShardKeys("no-such", 1, 0).Keys(), 0)
	require.ErrorIs(t, err, redisstore.ErrNoCampaign)
}

// TestNewestPause: NewestPause reads the newest generation over the
// shards given (0 before any pause, a shard that does not exist counting
// as none), and a generation PauseGen takes above it is above every
// shard's even when the root's counter is behind them.
func TestNewestPause(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	a, b := newDiscountShard(t, s, []int64{100}).Keys(), newDiscountShard(t, s, []int64{100}).Keys()
	missing := redisstore.Default.DiscountShardKeys("no-such", 1, 0).Keys()
	shards := []redisstore.Keys{a, b, missing}
	n, err := s.NewestPause(ctx, shards)
	require.NoError(t, err)
	require.Zero(t, n)

	for range 3 {
		g, err := s.PauseGen(ctx, b, 0)
		require.NoError(t, err)
		_, err = s.Pause(ctx, b, true, g)
		require.NoError(t, err)
	}
	n, err = s.NewestPause(ctx, shards)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	g, err := s.PauseGen(ctx, a, n) // a's counter is at 0
	require.NoError(t, err)
	require.EqualValues(t, 4, g)
	p, err := s.Pause(ctx, b, false, g)
	require.NoError(t, err)
	require.True(t, p.Applied)

	require.NoError(t, r.Client.Do(ctx, r.Client.B().Hset().Key(a.Meta).FieldValue().FieldValue("pause_applied", "x").Build()).Error())
	_, err = s.NewestPause(ctx, shards)
	require.ErrorIs(t, err, redisstore.ErrCorrupt)
}
