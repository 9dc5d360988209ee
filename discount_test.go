package hongbao_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

func createDiscount(t *testing.T, eng *hongbao.Engine, spec hongbao.DiscountSpec) *hongbao.Discount {
	t.Helper()
	if spec.ID == "" {
		spec.ID = testenv.UniqueID(t)
	}
	d, err := eng.Discounts().Create(context.Background(), spec)
	require.NoError(t, err)
	return d
}

// requireAudit audits campaign id and requires it healthy.
func requireAudit(t *testing.T, eng *hongbao.Engine, id string) *hongbao.DiscountAudit {
	t.Helper()
	a, err := eng.Discounts().Audit(context.Background(), id)
	require.NoError(t, err)
	require.True(t, a.OK, "audit: %v", a.Problems)
	return a
}

// TestDiscountLifecycle walks one order through every call and its
// repeats, on one shard.
func TestDiscountLifecycle(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 100_000, Quota: 800, Min: 1, Max: 500, Seed: seed(1)})
	require.Equal(t, hongbao.StateOpen, d.State)
	require.Equal(t, hongbao.DefaultHold, d.Hold)

	r, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 3520)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r.Outcome)
	require.Equal(t, hongbao.Held, r.State)
	require.True(t, r.Cents >= 1 && r.Cents <= 500, "%d", r.Cents)
	require.WithinDuration(t, time.Now().Add(hongbao.DefaultHold), r.ExpiresAt, 5*time.Second)

	again, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 3520)
	require.NoError(t, err)
	require.Equal(t, hongbao.ReservedAlready, again.Outcome)
	require.Equal(t, r.Cents, again.Cents)
	require.Equal(t, r.Seq, again.Seq)
	requireAudit(t, eng, d.ID)

	c, err := eng.Discounts().Confirm(ctx, d.ID, "alice", "o-1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Confirmed, c.State)
	require.False(t, c.Again)
	require.Equal(t, r.Cents, c.Cents)
	c, err = eng.Discounts().Confirm(ctx, d.ID, "alice", "o-1")
	require.NoError(t, err)
	require.True(t, c.Again)
	require.Equal(t, r.Cents, c.Cents)
	_, err = eng.Discounts().Cancel(ctx, d.ID, "alice", "o-1")
	require.ErrorIs(t, err, hongbao.ErrReservationConfirmed)
	again, err = eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 3520)
	require.NoError(t, err)
	require.Equal(t, hongbao.ReservedAlready, again.Outcome)
	require.Equal(t, hongbao.Confirmed, again.State)

	// A second order, cancelled: its amount goes back, the order is done.
	r2, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-2", 10_000)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r2.Outcome)
	x, err := eng.Discounts().Cancel(ctx, d.ID, "alice", "o-2")
	require.NoError(t, err)
	require.Equal(t, hongbao.Cancelled, x.State)
	require.False(t, x.Again)
	x, err = eng.Discounts().Cancel(ctx, d.ID, "alice", "o-2")
	require.NoError(t, err)
	require.True(t, x.Again)
	_, err = eng.Discounts().Confirm(ctx, d.ID, "alice", "o-2")
	require.ErrorIs(t, err, hongbao.ErrReservationCancelled)
	_, err = eng.Discounts().Reserve(ctx, d.ID, "alice", "o-2", 10_000)
	require.ErrorIs(t, err, hongbao.ErrReservationCancelled)
	_, err = eng.Discounts().Confirm(ctx, d.ID, "alice", "o-3")
	require.ErrorIs(t, err, hongbao.ErrNoReservation)
	_, err = eng.Discounts().Cancel(ctx, d.ID, "bob", "o-1")
	require.ErrorIs(t, err, hongbao.ErrNoReservation, "orders are per user")

	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.ConfirmedCount)
	require.Equal(t, r.Cents, st.ConfirmedCents)
	require.Zero(t, st.ReservedCount)
	require.EqualValues(t, 799, st.RemainingCount)
	require.Equal(t, int64(100_000)-r.Cents, st.RemainingCents)
	a := requireAudit(t, eng, d.ID)
	require.EqualValues(t, 1, a.CancelledCount)
}

// TestDiscountLimitsAndClipping: the count limit, the amount limit
// clipping the last discount, the order amount clipping, compensation
// topping up later discounts up to max, and nothing above max.
func TestDiscountLimitsAndClipping(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	// Fixed amounts: min = max = 200 cents, 50 of them.
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 10_000, Quota: 50, Min: 200, Max: 200,
		PerUserCount: 3, PerUserAmount: 500})
	reserve := func(user, order string, amount int64) hongbao.Reservation {
		t.Helper()
		r, err := eng.Discounts().Reserve(ctx, d.ID, user, order, amount)
		require.NoError(t, err)
		return r
	}
	require.EqualValues(t, 200, reserve("u", "1", 10_000).Cents)
	require.EqualValues(t, 200, reserve("u", "2", 10_000).Cents)
	r := reserve("u", "3", 10_000)
	require.Equal(t, hongbao.Reserved, r.Outcome)
	require.EqualValues(t, 100, r.Cents, "clipped to what is left of 500")
	require.Equal(t, hongbao.OverLimit, reserve("u", "4", 10_000).Outcome)
	require.EqualValues(t, 30, reserve("v", "1", 30).Cents, "clipped to the order amount")

	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.EqualValues(t, 100+170, st.CompensationCents, "the clipped cents wait in compensation")
	// Max is 200: compensation cannot top up these amounts.
	require.EqualValues(t, 200, reserve("w", "1", 10_000).Cents)
	requireAudit(t, eng, d.ID)

	// Cancelling a clipped reservation returns a unit of its own size.
	x, err := eng.Discounts().Cancel(ctx, d.ID, "v", "1")
	require.NoError(t, err)
	require.EqualValues(t, 30, x.Cents)
	requireAudit(t, eng, d.ID)
	_, err = eng.Discounts().Cancel(ctx, d.ID, "u", "1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, reserve("u", "5", 10_000).Outcome, "a cancel frees the user's limit")
	requireAudit(t, eng, d.ID)
}

// TestDiscountCompensationTopsUp: with room above the amounts, what
// clipping set aside tops up the next discounts, never above max.
func TestDiscountCompensationTopsUp(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 2_000, Quota: 20, Min: 100, Max: 150})
	r, err := eng.Discounts().Reserve(ctx, d.ID, "a", "1", 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Cents)
	var sum int64
	for i := range 19 {
		r, err := eng.Discounts().Reserve(ctx, d.ID, "b"+strconv.Itoa(i), "1", 1_000_000)
		require.NoError(t, err)
		require.Equal(t, hongbao.Reserved, r.Outcome)
		require.LessOrEqual(t, r.Cents, int64(150))
		sum += r.Cents
	}
	require.EqualValues(t, 2_000-1, sum, "the 99 clipped cents were all placed")
	r, err = eng.Discounts().Reserve(ctx, d.ID, "c", "1", 100)
	require.NoError(t, err)
	require.Equal(t, hongbao.Exhausted, r.Outcome)
	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Zero(t, st.RemainingCents)
	requireAudit(t, eng, d.ID)
}

// TestDiscountSpecErrors: each bad spec names its field.
func TestDiscountSpecErrors(t *testing.T) {
	t.Parallel()
	ok := hongbao.DiscountSpec{Budget: 100_000, Quota: 800, Min: 1, Max: 500}
	require.NoError(t, ok.Validate())
	for _, c := range []struct {
		mod   func(*hongbao.DiscountSpec)
		field string
	}{
		{func(s *hongbao.DiscountSpec) { s.Quota = 0 }, "quota"},
		{func(s *hongbao.DiscountSpec) { s.Budget = 0 }, "budget"},
		{func(s *hongbao.DiscountSpec) { s.Min, s.Max = 600, 500 }, "min"},
		{func(s *hongbao.DiscountSpec) { s.Max = 100_001 }, "max"},
		{func(s *hongbao.DiscountSpec) { s.Min = 126 }, "min"},
		{func(s *hongbao.DiscountSpec) { s.Max = 124 }, "max"},
		{func(s *hongbao.DiscountSpec) { s.Min, s.PerUserAmount = 10, 9 }, "per_user_amount"},
		{func(s *hongbao.DiscountSpec) { s.PerUserCount = -1 }, "per_user_count"},
		{func(s *hongbao.DiscountSpec) { s.Hold = 999 * time.Millisecond }, "hold"},
		{func(s *hongbao.DiscountSpec) { s.Hold = 25 * time.Hour }, "hold"},
		{func(s *hongbao.DiscountSpec) { s.Shards = 801 }, "shards"},
		{func(s *hongbao.DiscountSpec) { s.OpensAt, s.ClosesAt = time.Unix(100, 0), time.Unix(100, 0) }, "closes_at"},
	} {
		s := ok
		c.mod(&s)
		var se *hongbao.SpecError
		err := s.Validate()
		require.ErrorAs(t, err, &se, "%+v", s)
		require.Equal(t, c.field, se.Field, "%v", err)
		require.ErrorIs(t, err, hongbao.ErrInvalidSpec)
	}
	require.ErrorIs(t, hongbao.ValidateOrderID("a/b"), hongbao.ErrInvalidID)
	require.ErrorIs(t, hongbao.ValidateOrderID(string(make([]byte, 65))), hongbao.ErrInvalidID)
	require.NoError(t, hongbao.ValidateOrderID("o-1.2:3_4"))
}

// TestDiscountInterruptedCreate: a create that activated some shards and
// died before the root can be run again and yields one whole campaign; a
// live campaign is never loaded over.
func TestDiscountInterruptedCreate(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	id := testenv.UniqueID(t)
	layout := redisstore.Default.DiscountLayout(id, 3)
	// The root was loading; shard 2 alone went live, with a share of a
	// campaign that never existed.
	b, err := store.DiscountBegin(ctx, layout[0], redisstore.Loader{Token: "crashed"}, redisstore.DiscountMeta{ShardShare: redisstore.ShardShare{Shards: 3, Shard: 0}})
	require.NoError(t, err)
	_, err = store.DiscountBegin(ctx, layout[2], redisstore.Loader{Token: "crashed", Epoch: b.Epoch}, redisstore.DiscountMeta{ShardShare: redisstore.ShardShare{Shards: 3, Shard: 2, BaseCount: 2, BaseCents: 200}})
	require.NoError(t, err)
	require.NoError(t, store.Load(ctx, layout[2].Keys(), "crashed", 3, 3, []int64{100, 100}, nil))
	_, err = store.Activate(ctx, layout[2].Keys(), "crashed", 0, 0, 60_000)
	require.NoError(t, err)

	spec := hongbao.DiscountSpec{ID: id, Budget: 900, Quota: 9, Min: 100, Max: 100, Shards: 3}
	d, err := eng.Discounts().Create(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateOpen, d.State)
	a := requireAudit(t, eng, id)
	require.EqualValues(t, 9, a.PoolCount)
	_, err = eng.Discounts().Create(ctx, spec)
	require.ErrorIs(t, err, hongbao.ErrCampaignExists)

	// A shard that reserved something is never restarted either.
	r2, err := eng.Discounts().Reserve(ctx, id, usersHomedOn("i", 1, 3, 2)[0], "o", 100)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r2.Outcome)
	again, err := store.DiscountBegin(ctx, layout[2], redisstore.Loader{Token: "again", Epoch: time.Now().Add(time.Hour).UnixMilli()}, redisstore.DiscountMeta{})
	require.NoError(t, err)
	require.Equal(t, "open", again.Existing)
	requireAudit(t, eng, id)
}
