package redisstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestReserveMismatchInBatch: an order repeated in one batch with another
// order amount answers MISMATCH (13) and takes nothing; the same amount
// answers ALREADY. A later batch does the same against the stored record.
func TestReserveMismatchInBatch(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	k := newDiscountShard(t, s, []int64{100, 200, 300})

	out := make([]redisstore.DiscountResult, 3)
	require.NoError(t, s.Reserve(ctx, k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 500}, {User: "a", Order: "o", Cents: 50}, {User: "a", Order: "o", Cents: 500}}, out))
	require.Equal(t, redisstore.DiscountReserved, out[0].Code)
	require.Equal(t, redisstore.DiscountResult{Code: redisstore.DiscountMismatch}, out[1])
	require.Equal(t, redisstore.DiscountAlready, out[2].Code)
	require.Equal(t, out[0].Seq, out[2].Seq)

	out = out[:1]
	require.NoError(t, s.Reserve(ctx, k.ReserveKeys(), 1, []redisstore.DiscountCall{{User: "a", Order: "o", Cents: 499}}, out))
	require.Equal(t, redisstore.DiscountResult{Code: redisstore.DiscountMismatch}, out[0])
	lens, err := s.PoolLengths(ctx, []redisstore.Keys{k.Keys()})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, lens, "one amount taken, by the first request only")
}
