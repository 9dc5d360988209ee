package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// newDiscountShard loads and activates a one-shard discount campaign of
// the given amounts, straight through the store.
func newDiscountShard(t *testing.T, s *redisstore.Store, amounts []int64) redisstore.DiscountKeys {
	t.Helper()
	ctx := context.Background()
	k := redisstore.Default.DiscountShardKeys(testenv.UniqueID(t), 1, 0)
	var sum int64
	for _, a := range amounts {
		sum += a
	}
	m := redisstore.DiscountMeta{Max: 1000, HoldMs: 60000,
		ShardShare: redisstore.ShardShare{Shards: 1, Shard: 0, BaseCount: int64(len(amounts)), BaseCents: sum}}
	b, err := s.DiscountBegin(ctx, k, redisstore.Loader{Token: "tok"}, m)
	require.NoError(t, err)
	require.NotZero(t, b.Epoch, "loading")
	require.NoError(t, s.Load(ctx, k.Keys(), "tok", 1, 1, amounts, nil))
	_, err = s.Activate(ctx, k.Keys(), "tok", 0, 0, 3_600_000)
	require.NoError(t, err)
	return k
}

func TestDiscountScriptsBatchRepeats(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	k := newDiscountShard(t, s, []int64{100, 200, 300})

	// One batch: the same order twice, then another user.
	out := make([]redisstore.DiscountResult, 3)
	require.NoError(t, s.Reserve(ctx, k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 500}, {User: "a", Order: "o", Cents: 500}, {User: "b", Order: "o", Cents: 50}}, out))
	require.Equal(t, redisstore.DiscountReserved, out[0].Code)
	require.Equal(t, redisstore.DiscountAlready, out[1].Code)
	require.Equal(t, out[0].Seq, out[1].Seq)
	require.EqualValues(t, 100, out[0].Cents)
	require.Equal(t, redisstore.DiscountReserved, out[2].Code)
	require.EqualValues(t, 50, out[2].Cents, "clipped to the order; 150 to compensation")

	// Cancel the same order twice in one batch: released once.
	out2 := make([]redisstore.DiscountResult, 2)
	require.NoError(t, s.Cancel(ctx, k.CancelKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o"}, {User: "a", Order: "o"}}, out2))
	require.Equal(t, redisstore.DiscountReserved, out2[0].Code)
	require.Equal(t, redisstore.DiscountAlready, out2[1].Code)
	lens, err := s.PoolLengths(ctx, []redisstore.Keys{k.Keys()})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, lens, "one unit back, not two")

	// Confirm b twice in one batch, then a cancelled and an unknown order.
	out4 := make([]redisstore.DiscountResult, 4)
	require.NoError(t, s.Confirm(ctx, k.ConfirmKeys(), 1, []redisstore.DiscountCall{{User: "b", Order: "o"}, {User: "b", Order: "o"}, {User: "a", Order: "o"}, {User: "c", Order: "o"}}, out4))
	require.Equal(t, []int{redisstore.DiscountReserved, redisstore.DiscountAlready, redisstore.DiscountCancelled, redisstore.DiscountNotFound},
		[]int{out4[0].Code, out4[1].Code, out4[2].Code, out4[3].Code})
	n, err := r.Client.Do(ctx, r.Client.B().Xlen().Key(k.Confirms).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "one stream entry for the batch")
}

func TestDiscountScriptsRefuseBeforeWriting(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	k := newDiscountShard(t, s, []int64{100, 200})
	out := make([]redisstore.DiscountResult, 2)

	err := s.Reserve(ctx, k.ReserveKeys(), 4, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 5}}, out[:1])
	var se *redisstore.ShardsError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 1, se.Shards)
	err = s.Reserve(ctx, k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 5}, {User: "b", Order: "o", Cents: 0}}, out)
	require.ErrorIs(t, err, redisstore.ErrArgs, "an order of 0 cents")
	err = redisstore.ReserveArgv(ctx, s, k.ReserveKeys(), []string{"1", "a", "o"}, out[:1])
	require.ErrorIs(t, err, redisstore.ErrArgs, "not a triple")

	// A corrupt pool entry behind a good one: refused, nothing written.
	require.NoError(t, r.Client.Do(ctx, r.Client.B().Lset().Key(k.Pool).Index(1).Element("bad").Build()).Error())
	err = s.Reserve(ctx, k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 500}, {User: "b", Order: "o", Cents: 500}}, out)
	require.ErrorIs(t, err, redisstore.ErrCorrupt)
	n, err := r.Client.Do(ctx, r.Client.B().Hlen().Key(k.Resv).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "no reservation written")
	lens, err := s.PoolLengths(ctx, []redisstore.Keys{k.Keys()})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, lens)

	_, _, err = s.Reap(ctx, k, 0)
	require.ErrorIs(t, err, redisstore.ErrArgs)
	exp, more, err := s.Reap(ctx, redisstore.Default.DiscountShardKeys("nope-"+testenv.UniqueID(t), 1, 0), 10)
	require.NoError(t, err)
	require.Zero(t, exp)
	require.False(t, more)
}

func TestOrderKey(t *testing.T) {
	t.Parallel()
	u, o, ok := redisstore.SplitOrderKey(redisstore.OrderKey("user:1@x", "o-1.2"))
	require.True(t, ok)
	require.Equal(t, "user:1@x", u)
	require.Equal(t, "o-1.2", o)
	for _, bad := range []string{"", "/", "a/", "/b", "ab"} {
		_, _, ok := redisstore.SplitOrderKey(bad)
		require.False(t, ok, bad)
	}
	_, err := redisstore.ParseReservation("r|1|100|50|1700000000000|500")
	require.NoError(t, err)
	for _, bad := range []string{"", "q|1|1|1|1|1", "r|0|1|1|1|1", "r|1|1|0|1|1", "r|1|1|1|1", "r|1|1|1|1|x"} {
		_, err := redisstore.ParseReservation(bad)
		require.ErrorIs(t, err, redisstore.ErrCorrupt, bad)
	}
}

// TestReserveLargestOrder: the largest order amount the engine accepts
// (2^53-1 cents) is one the script takes too.
func TestReserveLargestOrder(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	k := newDiscountShard(t, s, []int64{100})
	out := make([]redisstore.DiscountResult, 1)
	require.NoError(t, s.Reserve(context.Background(), k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 9007199254740991}}, out))
	require.Equal(t, redisstore.DiscountReserved, out[0].Code)
	err := s.Reserve(context.Background(), k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "b", Order: "o", Cents: 9007199254740992}}, out)
	require.ErrorIs(t, err, redisstore.ErrArgs)
}
