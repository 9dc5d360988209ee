package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestBeginHoldAndFence: the root's begin gives the load to one create at
// a time while its hold runs, renewed by Renew and by each chunk loaded,
// and to another once it is given up or lapsed; the other shards refuse a
// load older than the newest that began them, so a load that lost the
// root writes nothing more anywhere.
func TestBeginHoldAndFence(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	layout := redisstore.Default.Layout(testenv.UniqueID(t), 3)
	root := layout[0]
	meta := func(k int) redisstore.Meta {
		m := redisstore.Meta{Share: &redisstore.ShardShare{Shards: 3, Shard: k, BaseCount: 1, BaseCents: 10}}
		if k == 0 {
			m.Terms = &redisstore.Terms{Total: 30, Count: 3}
		}
		return m
	}
	a := redisstore.Loader{Token: "a", Hold: time.Hour}
	b := redisstore.Loader{Token: "b", Hold: time.Hour}

	began, err := s.Begin(ctx, root, a, meta(0))
	require.NoError(t, err)
	require.NotZero(t, began.Epoch)
	a.Epoch = began.Epoch

	// While a's hold runs, b is told to wait, and changes nothing.
	held, err := s.Begin(ctx, root, b, meta(0))
	require.NoError(t, err)
	require.True(t, held.Held)
	require.Greater(t, held.Left, 59*time.Minute)
	require.NoError(t, s.Renew(ctx, root, "a", time.Hour))
	require.ErrorIs(t, s.Renew(ctx, root, "b", time.Hour), redisstore.ErrStale)
	begin(t, s, layout[1], a, meta(1))

	// Given up, the hold is taken over at once; a chunk loaded renews it.
	require.NoError(t, s.Renew(ctx, root, "a", 0))
	require.NoError(t, s.Load(ctx, root, "a", 1, 3, []int64{10}, nil))
	held, err = s.Begin(ctx, root, b, meta(0))
	require.NoError(t, err)
	require.True(t, held.Held, "the chunk renewed a's hold")
	require.NoError(t, s.Renew(ctx, root, "a", 0))
	began, err = s.Begin(ctx, root, b, meta(0))
	require.NoError(t, err)
	require.Greater(t, began.Epoch, a.Epoch, "each begin of the root draws a newer epoch")
	b.Epoch = began.Epoch

	// a lost the root: nothing of it goes on there.
	require.ErrorIs(t, s.Renew(ctx, root, "a", time.Hour), redisstore.ErrStale)
	require.ErrorIs(t, s.Load(ctx, root, "a", 0, 3, []int64{10}, nil), redisstore.ErrStale)

	// Shard 1, begun by a, is begun again by b; a can no longer take it
	// back, nor write to it.
	begin(t, s, layout[1], b, meta(1))
	again, err := s.Begin(ctx, layout[1], a, meta(1))
	require.NoError(t, err)
	require.Equal(t, redisstore.Begun{Held: true}, again, "a newer load began it")
	require.ErrorIs(t, s.Load(ctx, layout[1], "a", 0, 3, []int64{10}, nil), redisstore.ErrStale)

	// Shard 2, which b has not reached, a may still begin (a's load goes
	// nowhere: its root is b's); b begins it again after.
	begin(t, s, layout[2], a, meta(2))
	begin(t, s, layout[2], b, meta(2))
	require.ErrorIs(t, s.Load(ctx, layout[2], "a", 0, 3, []int64{10}, nil), redisstore.ErrStale)

	// b loads and activates every shard, the root last; a's begin of an
	// activated shard that never served is refused all the same, and the
	// live root is never begun again.
	for k := 2; k >= 0; k-- {
		require.NoError(t, s.Load(ctx, layout[k], "b", int64(k+1), 3, []int64{10}, nil))
		_, err := s.Activate(ctx, layout[k], "b", 0, 0, time.Hour.Milliseconds())
		require.NoError(t, err)
	}
	again, err = s.Begin(ctx, layout[2], a, meta(2))
	require.NoError(t, err)
	require.True(t, again.Held)
	again, err = s.Begin(ctx, root, redisstore.Loader{Token: "c", Hold: time.Hour}, meta(0))
	require.NoError(t, err)
	require.Equal(t, redisstore.Begun{Existing: "open"}, again)
	snap, err := s.Status(ctx, root)
	require.NoError(t, err)
	require.NotContains(t, snap.Meta, "load_until", "activation drops the hold")
	require.NotContains(t, snap.Meta, "load_token")
	require.Equal(t, b.Epoch, snap.Int("load_epoch"), "and keeps the epoch")
	require.ErrorIs(t, s.Renew(ctx, root, "b", time.Hour), redisstore.ErrStale, "a live campaign is no load")
}

// begin begins shard k for load l, and requires that it began.
func begin(t *testing.T, s *redisstore.Store, k redisstore.Keys, l redisstore.Loader, m redisstore.Meta) {
	t.Helper()
	b, err := s.Begin(context.Background(), k, l, m)
	require.NoError(t, err)
	require.Equal(t, l.Epoch, b.Epoch, "began: %+v", b)
}
