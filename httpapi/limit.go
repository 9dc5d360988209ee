package httpapi

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// bucketLimiter is a token bucket per key (a user, a client address), kept
// in this process. Buckets that refilled completely are forgotten when a
// shard grows, so memory follows the active keys. A shard never holds more
// than maxPerShard buckets: keys arriving faster than their buckets refill
// (a client with many addresses, a very low rate) would otherwise grow it
// without bound. At the cap arbitrary buckets are forgotten down to three
// quarters of it, which at worst gives their keys a fresh burst. Sweeps
// run when a shard has doubled since the last one (or reached the cap),
// so their cost per new key stays constant.
type bucketLimiter struct {
	rate        float64 // tokens per second
	burst       float64
	maxPerShard int
	seed        maphash.Seed
	shards      [64]bucketShard
}

type bucketShard struct {
	mu      sync.Mutex
	m       map[string]*bucket
	sweepAt int // size at which the next sweep runs; 0 before the first
}

type bucket struct {
	tokens float64
	at     time.Time
}

const (
	shardSweepAt   = 4096
	shardMaxBucket = 16384 // 64 shards: about a million keys, some 100 MB at most
)

func newBucketLimiter(rate float64, burst int) *bucketLimiter {
	if rate <= 0 {
		return nil
	}
	l := &bucketLimiter{rate: rate, burst: float64(max(burst, 1)), maxPerShard: shardMaxBucket, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*bucket{}
	}
	return l
}

// allow takes a token for key, or says how long until one is there. A nil
// limiter allows everything.
func (l *bucketLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[key]
	if b == nil {
		if sh.sweepAt == 0 {
			sh.sweepAt = min(shardSweepAt, l.maxPerShard)
		}
		if len(sh.m) >= sh.sweepAt {
			l.sweep(sh, now)
			if len(sh.m) >= l.maxPerShard {
				keep := l.maxPerShard * 3 / 4
				for k := range sh.m {
					if len(sh.m) <= keep {
						break
					}
					delete(sh.m, k)
				}
			}
			sh.sweepAt = min(max(shardSweepAt, 2*len(sh.m)), l.maxPerShard)
		}
		b = &bucket{tokens: l.burst, at: now}
		sh.m[key] = b
	}
	if now.After(b.at) {
		b.tokens, b.at = l.refilled(b, now), now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, l.wait(b.tokens)
}

// shard is the shard that holds key's bucket.
func (l *bucketLimiter) shard(key string) *bucketShard {
	return &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
}

// refilled is what bucket b holds at now: its tokens and those it gained
// since, up to the burst (a clock that went back gains nothing).
func (l *bucketLimiter) refilled(b *bucket, now time.Time) float64 {
	return min(l.burst, b.tokens+max(now.Sub(b.at).Seconds(), 0)*l.rate)
}

// wait is how long a bucket holding tokens (less than one) waits for one.
func (l *bucketLimiter) wait(tokens float64) time.Duration {
	return time.Duration((1 - tokens) / l.rate * float64(time.Second))
}

// sweep forgets the buckets that are full again: forgetting them changes
// nothing.
func (l *bucketLimiter) sweep(sh *bucketShard, now time.Time) {
	for k, b := range sh.m {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(sh.m, k)
		}
	}
}

// globalLimiter caps requests per second over every serve process sharing
// one Redis: a count per second in Redis (Store.CountRequests),
// which each process draws from in chunks so that most requests do not
// touch Redis at all.
type globalLimiter struct {
	count func(ctx context.Context, sec, n int64) (int64, error)
	limit int64
	chunk int64

	mu    sync.Mutex
	sec   int64 // the second the local allowance belongs to
	left  int64 // local allowance in that second
	empty bool  // the second's global budget is spent
}

func newGlobalLimiter(count func(ctx context.Context, sec, n int64) (int64, error), perSecond int64) *globalLimiter {
	if perSecond <= 0 {
		return nil
	}
	// Small chunks keep the budget fair among processes; large ones save
	// Redis calls. One chunk is 2% of the limit, at most 100.
	chunk := min(max(perSecond/50, 1), 100)
	return &globalLimiter{count: count, limit: perSecond, chunk: chunk}
}

// allow takes one request from this second's budget. When Redis cannot be
// asked it allows the request: the limit protects the service, and a
// Redis that is down fails the grab anyway.
func (g *globalLimiter) allow(ctx context.Context, now time.Time) (bool, time.Duration, error) {
	if g == nil {
		return true, 0, nil
	}
	sec := now.Unix()
	untilNext := time.Unix(sec+1, 0).Sub(now)
	g.mu.Lock()
	defer g.mu.Unlock()
	if sec != g.sec {
		g.sec, g.left, g.empty = sec, 0, false
	}
	if g.left > 0 {
		g.left--
		return true, 0, nil
	}
	if g.empty {
		return false, untilNext, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n, err := g.count(ctx, sec, g.chunk)
	if err != nil {
		// Fail open, for a whole chunk: the requests queued behind this
		// one on the mutex must not each wait out their own timeout on a
		// Redis that does not answer.
		g.left = g.chunk - 1
		return true, 0, err
	}
	got := g.chunk
	if n > g.limit {
		got = max(0, g.limit-(n-g.chunk))
		g.empty = true
	}
	if got == 0 {
		return false, untilNext, nil
	}
	g.left = got - 1
	return true, 0, nil
}
