package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestLease: one holder at a time; the holder extends it; only the holder
// releases it; a lease left to expire is free again.
func TestLease(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	s := redisstore.New(r.Client)
	ctx := context.Background()
	key := redisstore.SchedulerLease

	held, err := s.HoldLease(ctx, key, "a", time.Minute)
	require.NoError(t, err)
	require.True(t, held, "a free lease is taken")
	held, err = s.HoldLease(ctx, key, "b", time.Minute)
	require.NoError(t, err)
	require.False(t, held, "held by another")
	held, err = s.HoldLease(ctx, key, "a", 2*time.Minute)
	require.NoError(t, err)
	require.True(t, held, "the holder extends it")
	ttl, err := r.Client.Do(ctx, r.Client.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Minute.Milliseconds(), "extended to the new ttl")

	require.NoError(t, s.ReleaseLease(ctx, key, "b"))
	v, err := r.Client.Do(ctx, r.Client.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "a", v, "another's release leaves it")
	require.NoError(t, s.ReleaseLease(ctx, key, "a"))
	held, err = s.HoldLease(ctx, key, "b", 50*time.Millisecond)
	require.NoError(t, err)
	require.True(t, held, "free after its holder released it")
	require.Eventually(t, func() bool {
		held, err := s.HoldLease(ctx, key, "c", time.Minute)
		return err == nil && held
	}, 5*time.Second, 10*time.Millisecond, "free again once it expired")

	_, err = s.HoldLease(ctx, key, "c", 0)
	require.ErrorIs(t, err, redisstore.ErrArgs, "a ttl under a millisecond is refused")
}
