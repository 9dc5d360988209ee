package httpapi

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestBucketLimiterBounded: keys that keep arriving faster than their
// buckets refill (here: one token per hour) do not grow the limiter past
// its cap.
func TestBucketLimiterBounded(t *testing.T) {
	t.Parallel()
	l := newBucketLimiter(1.0/3600, 1)
	l.maxPerShard = 8
	now := time.Unix(1_900_000_000, 0)
	ok, _ := l.allow("held", now)
	require.True(t, ok)
	ok, wait := l.allow("held", now)
	require.False(t, ok)
	require.Greater(t, wait, time.Duration(0))
	for i := 0; i < 100_000; i++ {
		ok, _ := l.allow("addr-"+strconv.Itoa(i), now)
		require.True(t, ok)
	}
	total := 0
	for i := range l.shards {
		n := len(l.shards[i].m)
		require.LessOrEqual(t, n, l.maxPerShard, "shard %d", i)
		total += n
	}
	require.LessOrEqual(t, total, len(l.shards)*l.maxPerShard)
}

// TestBucketLimiterSweepsFull: buckets that refilled are forgotten by a
// sweep, and a key still limited stays limited across it.
func TestBucketLimiterSweepsFull(t *testing.T) {
	t.Parallel()
	l := newBucketLimiter(1, 1) // a bucket is full again one second after its use
	l.maxPerShard = 64
	now := time.Unix(1_900_000_000, 0)
	ok, _ := l.allow("held", now)
	require.True(t, ok)
	for i := 0; i < 10_000; i++ {
		at := now.Add(time.Duration(i) * 10 * time.Millisecond)
		ok, _ := l.allow("addr-"+strconv.Itoa(i), at)
		require.True(t, ok)
		if i%50 == 0 {
			// Used again within its second: still limited, unless its
			// shard had to forget it at the cap.
			ok, _ := l.allow("held", at)
			if ok {
				ok, _ = l.allow("held", at)
				require.False(t, ok, "a limited key got two tokens at once")
			}
		}
	}
	for i := range l.shards {
		require.LessOrEqual(t, len(l.shards[i].m), l.maxPerShard)
	}
}

// TestGlobalLimiterFailsOpenForAChunk: when Redis cannot be asked, one
// request pays for finding out and the rest of a chunk passes without
// asking again (they would otherwise queue on the limiter's mutex, each
// waiting out its own timeout on a stalled Redis).
func TestGlobalLimiterFailsOpenForAChunk(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	g := newGlobalLimiter(eng.CountRequests, 1000)
	require.EqualValues(t, 20, g.chunk)
	require.NoError(t, r.Server.Stop())
	ctx, now := t.Context(), time.Now()
	ok, _, err := g.allow(ctx, now)
	require.True(t, ok, "fail open")
	require.Error(t, err)
	for i := 1; i < int(g.chunk); i++ {
		ok, _, err := g.allow(ctx, now)
		require.True(t, ok)
		require.NoError(t, err, "request %d of the chunk asked Redis again", i)
	}
	ok, _, err = g.allow(ctx, now)
	require.True(t, ok)
	require.Error(t, err, "the next chunk asks Redis again")
}
