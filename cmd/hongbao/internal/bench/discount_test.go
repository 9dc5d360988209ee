package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestRunDiscount runs both designs on a small campaign, on our own
// redis-server, and checks that both pass their invariant checks and that
// the comparison is filled in.
func TestRunDiscount(t *testing.T) {
	if !redisserver.Available("") {
		t.Skip("redis-server is not installed")
	}
	t.Parallel()
	c, err := RunDiscount(context.Background(), DiscountOptions{
		Quota: 2000, Budget: 200_000, Min: 1, Max: 200, PerUserCount: 3, PerUserAmount: 300, Seed: 1,
		Users: 2500, Concurrency: 32, BaselineWorkers: 8, Shards: 2, Runs: 1,
	})
	require.NoError(t, err)
	for _, r := range []*DiscountResult{c.Hongbao, c.Published} {
		require.True(t, r.OK, "%s: %v", r.Design, r.Problems)
		require.EqualValues(t, 2000, r.Payments, r.Design)
		require.EqualValues(t, 500, r.Refused, "%s: every user beyond the quota is refused", r.Design)
		require.Positive(t, r.PaymentsPerSec)
		require.Positive(t, r.RedisUsPerReservation)
	}
	require.GreaterOrEqual(t, c.Published.CallsPerPayment, 4.0, "journal, pop, usage, journal done: four calls")
	require.Less(t, c.Hongbao.CallsPerPayment, 2.0, "reserve and confirm, coalesced")
	require.Positive(t, c.Ratio)
}

func TestDiscountOptionsValidate(t *testing.T) {
	t.Parallel()
	ok := DiscountOptions{Quota: 10, Budget: 100, Users: 1, Concurrency: 1, BaselineWorkers: 1}
	require.NoError(t, ok.Validate())
	for _, mod := range []func(*DiscountOptions){
		func(o *DiscountOptions) { o.Quota = 0 },
		func(o *DiscountOptions) { o.Users = 0 },
		func(o *DiscountOptions) { o.BaselineWorkers = 0 },
		func(o *DiscountOptions) { o.AOF = "sometimes" },
		func(o *DiscountOptions) { o.Min = 11 },
	} {
		o := ok
		mod(&o)
		require.Error(t, o.Validate())
	}
}
