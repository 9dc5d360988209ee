package hongbao_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// randomDiscount draws a campaign: a budget, a quota, a range, limits
// (sometimes none), with the hold at its minimum so abandoned
// reservations expire within the test.
func randomDiscount(r *rand.Rand) hongbao.DiscountSpec {
	s := hongbao.DiscountSpec{Quota: 50 + r.IntN(400), Min: 1 + r.Int64N(50), Hold: time.Second}
	avg := s.Min + r.Int64N(300)
	s.Budget = avg * int64(s.Quota)
	s.Max = min(s.Budget, avg*2+r.Int64N(200))
	if r.IntN(4) > 0 {
		s.PerUserCount = 1 + r.IntN(4)
	}
	if r.IntN(4) > 0 {
		s.PerUserAmount = s.Min + r.Int64N(3*avg)
	}
	return s
}

// users returns n user ids with prefix.
func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// TestDiscountProperties: random campaigns, each run over one shard and
// over four with the same amounts, under a storm of reservations,
// confirms, cancels and abandoned reservations; at every status read and
// at the end, confirmed + reserved + remaining = budget and quota; no
// user above its limits; no discount above its order or max; the audit
// of the contents agrees.
func TestDiscountProperties(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for i := range 6 {
		rnd := rand.New(rand.NewPCG(uint64(i), 0xd15c0))
		spec := randomDiscount(rnd)
		spec.Seed = seed(uint64(i))
		cfg := stormConfig{
			users: users("p"+strconv.Itoa(i)+"-", 60+rnd.IntN(200)), ordersPerUser: 1 + rnd.IntN(4),
			cancelPct: rnd.IntN(40), abandonPct: rnd.IntN(30), maxOrder: 1 + rnd.Int64N(3*spec.Max),
			workers: 16, seed: uint64(i),
		}
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("campaign%d/shards%d", i, shards), func(t *testing.T) {
				t.Parallel()
				runProperty(t, r.Client, spec, shards, cfg)
			})
		}
	}
}

// runProperty creates spec over shards on client c, storms it and checks.
func runProperty(t *testing.T, c rueidis.Client, spec hongbao.DiscountSpec, shards int, cfg stormConfig) {
	t.Helper()
	eng, err := hongbao.New(hongbao.Config{Redis: c})
	require.NoError(t, err)
	spec.Shards = shards
	d := createDiscount(t, eng, spec)
	log := storm(t, eng, d, cfg)
	st := checkStorm(t, eng, d, log)
	t.Logf("%d users x %d orders, limits %d/%d: %d confirmed (%d cents), %d left (%d cents, %d in compensation), %d transfers",
		len(cfg.users), cfg.ordersPerUser, d.PerUserCount, d.PerUserAmount, st.ConfirmedCount, st.ConfirmedCents,
		st.RemainingCount, st.RemainingCents, st.CompensationCents, eng.Discounts().Stats().Transfers)
}

// TestDiscountDemandExceedsSupply: more payments than discounts, every
// reservation confirmed, over one shard and over four whose users all
// live on one shard: the whole quota is used, the campaign closes
// exhausted-for-good once its settlement looks (here: the status says
// nothing is left), and the leftover is what compensation could not
// place.
func TestDiscountDemandExceedsSupply(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards%d", shards), func(t *testing.T) {
			t.Parallel()
			eng, _ := newEngine(t)
			ctx := context.Background()
			d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 100_000, Quota: 800, Min: 1, Max: 500,
				PerUserCount: 3, PerUserAmount: 800, Shards: shards, Seed: seed(12)})
			us := users("demand-", 1000)
			if shards > 1 {
				us = usersHomedOn("skew-", 1000, shards, 2)
			}
			log := storm(t, eng, d, stormConfig{users: us, ordersPerUser: 2, maxOrder: 600, workers: 32, seed: 5})
			st := checkStorm(t, eng, d, log)
			require.Zero(t, st.RemainingCount, "the whole quota is used")
			require.EqualValues(t, 800, st.ConfirmedCount)
			require.Equal(t, st.CompensationCents, st.RemainingCents, "the leftover is compensation only")
			t.Logf("shards %d: leftover %d cents of %d (compensation that found no room under max and the limits)",
				shards, st.RemainingCents, d.Budget)
			r, err := eng.Discounts().Reserve(ctx, d.ID, "late", "o", 100)
			require.NoError(t, err)
			require.Equal(t, hongbao.Exhausted, r.Outcome)
			if shards > 1 {
				require.NotZero(t, eng.Discounts().Stats().Transfers, "the users' home borrowed from the others")
			}
		})
	}
}

// TestDiscountExpiry: an abandoned reservation expires by the Redis
// clock: confirm and reserve answer expired at once, the reaper returns
// its amount and the user's usage, and a second reap changes nothing.
func TestDiscountExpiry(t *testing.T) {
	t.Parallel()
	eng, rc := newEngine(t)
	ctx := context.Background()
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 1_000, Quota: 10, Min: 100, Max: 100,
		PerUserCount: 1, Hold: time.Second})
	r, err := eng.Discounts().Reserve(ctx, d.ID, "eve", "o-1", 500)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r.Outcome)
	r2, err := eng.Discounts().Reserve(ctx, d.ID, "eve", "o-2", 500)
	require.NoError(t, err)
	require.Equal(t, hongbao.OverLimit, r2.Outcome)

	// The hold ends by the Redis clock; until the reaper runs, the
	// reservation still counts as reserved.
	waitRedisClock(t, rc.Client, r.ExpiresAt)
	_, err = eng.Discounts().Confirm(ctx, d.ID, "eve", "o-1")
	require.ErrorIs(t, err, hongbao.ErrReservationExpired)
	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.ReservedCount, "expired, not yet reaped")
	_, err = eng.Discounts().Reserve(ctx, d.ID, "eve", "o-1", 500)
	require.ErrorIs(t, err, hongbao.ErrReservationExpired)
	requireAudit(t, eng, d.ID)
	n, err := eng.Discounts().Reap(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = eng.Discounts().Reap(ctx, d.ID)
	require.NoError(t, err)
	require.Zero(t, n, "a second reap changes nothing")
	st, err = eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Zero(t, st.ReservedCount)
	require.EqualValues(t, 10, st.RemainingCount)
	require.EqualValues(t, 1_000, st.RemainingCents)
	x, err := eng.Discounts().Cancel(ctx, d.ID, "eve", "o-1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Expired, x.State)
	r2, err = eng.Discounts().Reserve(ctx, d.ID, "eve", "o-2", 500)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r2.Outcome, "the expiry freed the user's limit")
	requireAudit(t, eng, d.ID)
}

// TestDiscountCluster runs the property storm on a real Redis Cluster of
// three masters, four shards spread over them.
func TestDiscountCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	t.Parallel()
	c := testenv.NewCluster(t, testenv.ClusterOptions{Masters: 3})
	rnd := rand.New(rand.NewPCG(99, 1))
	spec := randomDiscount(rnd)
	spec.Seed = seed(99)
	runProperty(t, c.Client, spec, 4, stormConfig{users: users("cl-", 200), ordersPerUser: 3, cancelPct: 20,
		abandonPct: 10, maxOrder: 2 * spec.Max, workers: 16, seed: 99})
}

// waitRedisClock waits until the Redis clock has passed at, within a
// deadline: holds end by that clock, not by ours.
func waitRedisClock(t *testing.T, c rueidis.Client, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ts, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
		require.NoError(t, err)
		if time.Unix(ts[0], ts[1]*1000).After(at) {
			return
		}
		require.True(t, time.Now().Before(deadline), "the Redis clock did not reach %v", at)
		time.Sleep(10 * time.Millisecond)
	}
}
