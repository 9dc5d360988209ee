package atomicop_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/atomicop"
	"github.com/hongbao/hongbao/internal/testenv"
)

type onceEnv struct {
	*atomicop.Once
	client rueidis.Client
	prefix string
}

func newOnce(t *testing.T) onceEnv {
	t.Helper()
	r := testenv.SharedRedis(t)
	prefix := "t:" + testenv.UniqueID(t) + ":"
	o, err := atomicop.NewOnce(r.Client, &atomicop.OnceConfig{Prefix: prefix})
	require.NoError(t, err)
	return onceEnv{Once: o, client: r.Client, prefix: prefix}
}

// markExists reports whether the mark key of id (as documented in
// OnceConfig.Prefix) exists.
func (e onceEnv) markExists(t *testing.T, id string) bool {
	t.Helper()
	n, err := e.client.Do(context.Background(), e.client.B().Exists().Key(e.prefix+"{"+id+"}:mark").Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// claimWhenFree claims id as soon as its lease has run out.
func (e onceEnv) claimWhenFree(t *testing.T, id string, lease time.Duration) atomicop.Claim {
	t.Helper()
	var c atomicop.Claim
	eventually(t, 5*time.Second, "the lease of "+id+" never ran out", func() bool {
		var err error
		c, err = e.Claim(context.Background(), id, lease)
		require.NoError(t, err)
		return c.Status == atomicop.Claimed
	})
	return c
}

func requireNotOwner(t *testing.T, err error, now atomicop.ClaimStatus) {
	t.Helper()
	require.ErrorIs(t, err, atomicop.ErrNotOwner)
	var no *atomicop.NotOwnerError
	require.True(t, errors.As(err, &no))
	require.Equal(t, now, no.Now, "what holds the message now")
}

func TestOnceClaimDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)

	c, err := o.Claim(ctx, "m1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, c.Status)
	require.Positive(t, c.Token)
	require.Equal(t, time.Minute, c.TTL)

	busy, err := o.Claim(ctx, "m1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Busy, busy.Status)
	require.Zero(t, busy.Token, "another worker's token is not handed out")
	require.Positive(t, busy.TTL)
	require.LessOrEqual(t, busy.TTL, time.Minute)

	require.NoError(t, o.Done(ctx, "m1", c.Token, time.Hour))
	require.NoError(t, o.Done(ctx, "m1", c.Token, time.Hour), "a repeated Done changes nothing")

	d, err := o.Claim(ctx, "m1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Delivered, d.Status)
	require.Zero(t, d.Token)
	require.Greater(t, d.TTL, time.Minute)

	requireNotOwner(t, o.Release(ctx, "m1", c.Token), atomicop.Delivered)
	requireNotOwner(t, o.Extend(ctx, "m1", c.Token, time.Minute), atomicop.Delivered)
}

func TestOnceReleasedClaimGoesToAnotherWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	a, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.NoError(t, o.Release(ctx, "m", a.Token))
	require.NoError(t, o.Release(ctx, "m", a.Token), "releasing a free message is a no-op")

	b, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, b.Status)
	require.Greater(t, b.Token, a.Token, "tokens grow with every claim")

	requireNotOwner(t, o.Release(ctx, "m", a.Token), atomicop.Busy)
	requireNotOwner(t, o.Done(ctx, "m", a.Token, time.Hour), atomicop.Busy)
	require.NoError(t, o.Done(ctx, "m", b.Token, time.Hour))
}

// A worker that dies holds the message only until its lease runs out;
// its stale token can then neither release, extend nor confirm.
func TestOnceExpiredClaimAndStaleToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	a, err := o.Claim(ctx, "m", 50*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, a.Status)

	b := o.claimWhenFree(t, "m", time.Minute)
	require.Greater(t, b.Token, a.Token)

	requireNotOwner(t, o.Done(ctx, "m", a.Token, time.Hour), atomicop.Busy)
	requireNotOwner(t, o.Release(ctx, "m", a.Token), atomicop.Busy)
	requireNotOwner(t, o.Extend(ctx, "m", a.Token, time.Minute), atomicop.Busy)
	c, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Busy, c.Status, "the stale token changed nothing")

	require.NoError(t, o.Done(ctx, "m", b.Token, time.Hour))
	requireNotOwner(t, o.Done(ctx, "m", a.Token, time.Hour), atomicop.Delivered)
	requireNotOwner(t, o.Release(ctx, "m", a.Token), atomicop.Delivered)

	// A token that came and went: nothing holds the message, and the stale
	// token still cannot confirm it.
	x, err := o.Claim(ctx, "n", time.Minute)
	require.NoError(t, err)
	require.NoError(t, o.Release(ctx, "n", x.Token))
	y, err := o.Claim(ctx, "n", time.Minute)
	require.NoError(t, err)
	require.NoError(t, o.Release(ctx, "n", y.Token))
	requireNotOwner(t, o.Done(ctx, "n", x.Token, time.Hour), atomicop.Free)
	requireNotOwner(t, o.Extend(ctx, "n", x.Token, time.Minute), atomicop.Free)
	requireNotOwner(t, o.Done(ctx, "never-claimed", 1, time.Hour), atomicop.Free)
}

// A lease that ran out while nobody else claimed the message still
// belongs to its worker: Done and Extend succeed, because no other push can
// have happened.
func TestOnceLapsedLeaseNobodyClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)

	a, err := o.Claim(ctx, "m", 30*time.Millisecond)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "lease never ran out", func() bool { return !o.markExists(t, "m") })
	require.NoError(t, o.Done(ctx, "m", a.Token, time.Hour))
	d, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Delivered, d.Status)

	b, err := o.Claim(ctx, "e", 30*time.Millisecond)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "lease never ran out", func() bool { return !o.markExists(t, "e") })
	require.NoError(t, o.Extend(ctx, "e", b.Token, time.Minute), "taken back")
	c, err := o.Claim(ctx, "e", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Busy, c.Status)
}

func TestOnceExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	a, err := o.Claim(ctx, "m", 200*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, o.Extend(ctx, "m", a.Token, time.Hour))
	c, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Busy, c.Status)
	require.Greater(t, c.TTL, time.Minute, "the lease was renewed")
}

// Once the keep time is over, the message can be claimed again, with a
// larger token than before.
func TestOnceKeepRunsOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	a, err := o.Claim(ctx, "m", time.Minute)
	require.NoError(t, err)
	require.NoError(t, o.Done(ctx, "m", a.Token, 40*time.Millisecond))
	b := o.claimWhenFree(t, "m", time.Minute)
	require.Greater(t, b.Token, a.Token)
}

func TestOnceInvalidArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"zero lease", func() error { _, err := o.Claim(ctx, "m", 0); return err }, atomicop.ErrDuration},
		{"sub-millisecond lease", func() error { _, err := o.Claim(ctx, "m", 500*time.Microsecond); return err }, atomicop.ErrDuration},
		{"negative keep", func() error { return o.Done(ctx, "m", 1, -time.Second) }, atomicop.ErrDuration},
		{"zero token", func() error { return o.Done(ctx, "m", 0, time.Second) }, atomicop.ErrInvalidToken},
		{"negative token", func() error { return o.Release(ctx, "m", -3) }, atomicop.ErrInvalidToken},
		{"extend with zero token", func() error { return o.Extend(ctx, "m", 0, time.Second) }, atomicop.ErrInvalidToken},
		{"empty id", func() error { _, err := o.Claim(ctx, "", time.Second); return err }, atomicop.ErrInvalidKey},
		{"id with a brace", func() error { _, err := o.Claim(ctx, "a{b", time.Second); return err }, atomicop.ErrInvalidKey},
		{"bad prefix", func() error { _, err := atomicop.NewOnce(nil, &atomicop.OnceConfig{Prefix: "{x}"}); return err }, atomicop.ErrInvalidKey},
		{"bad fence time", func() error {
			_, err := atomicop.NewOnce(nil, &atomicop.OnceConfig{FenceTTL: time.Microsecond})
			return err
		}, atomicop.ErrDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.call(), tt.want)
		})
	}
}

// Claims of one message exclude each other, and tokens grow in the order
// the claims were won.
func TestOnceClaimsExcludeEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	const workers, rounds = 64, 5
	var holder atomic.Int32
	var tokens []int64 // appended only by the holder
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for won := 0; won < rounds; {
				c, err := o.Claim(ctx, "m", time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if c.Status != atomicop.Claimed {
					continue
				}
				if !holder.CompareAndSwap(0, 1) {
					errs <- errors.New("two workers hold the claim at once")
					return
				}
				tokens = append(tokens, c.Token)
				holder.Store(0)
				if err := o.Release(ctx, "m", c.Token); err != nil {
					errs <- err
					return
				}
				won++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, tokens, workers*rounds)
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1], "tokens grow with every claim")
	}
}

// The acceptance test of once-only delivery: many workers, every message
// handed to several of them, 30% of the winners die after claiming and
// before pushing. Every message is delivered, none twice.
func TestOnceDeliveryWithDyingWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	const (
		workers  = 64
		messages = 400
		copies   = 3
		dieRate  = 0.3
		lease    = 300 * time.Millisecond
	)
	// The source redelivers a copy whose worker died, after a visibility
	// timeout a little longer than the lease, as queues do. A worker that
	// gets Busy acknowledges its copy: the holder's copy comes back if the
	// holder dies.
	work := make(chan int, messages*copies)
	var pending sync.WaitGroup
	pending.Add(messages * copies)
	for m := range messages {
		for range copies {
			work <- m
		}
	}
	go func() { pending.Wait(); close(work) }()

	pushes, claims := make([]atomic.Int32, messages), make([]atomic.Int32, messages)
	var deaths, secondClaims atomic.Int32
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(7, uint64(w)))
		wg.Go(func() {
			for m := range work {
				id := "msg-" + strconv.Itoa(m)
				c, err := o.Claim(ctx, id, lease)
				if err != nil {
					errs <- err
					pending.Done()
					continue
				}
				if c.Status != atomicop.Claimed {
					pending.Done()
					continue
				}
				if claims[m].Add(1) > 1 {
					secondClaims.Add(1)
				}
				if rng.Float64() < dieRate {
					deaths.Add(1)
					time.AfterFunc(lease+20*time.Millisecond, func() { work <- m })
					continue
				}
				pushes[m].Add(1) // the push, carrying id and token
				if err := o.Done(ctx, id, c.Token, time.Minute); err != nil {
					errs <- err
				}
				pending.Done()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for m := range messages {
		require.EqualValues(t, 1, pushes[m].Load(), "message %d delivered exactly once", m)
	}
	require.Positive(t, deaths.Load())
	require.Positive(t, secondClaims.Load(), "expired claims were delivered by other workers")
	t.Logf("%d workers died after claiming; %d claims of messages after an earlier claim", deaths.Load(), secondClaims.Load())
}

// fenceKey is the counter of message id, as OnceConfig.Prefix documents it.
func (e onceEnv) fenceKey(id string) string { return e.prefix + "{" + id + "}:fence" }

// redisMicros reads the Redis clock in microseconds since the epoch.
func redisMicros(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	now, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return now[0]*1_000_000 + now[1]
}

// claimAndRelease claims id and hands it back, returning the token.
func (e onceEnv) claimAndRelease(t *testing.T, id string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := e.Claim(ctx, id, time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, c.Status)
	require.NoError(t, e.Release(ctx, id, c.Token))
	return c.Token
}

// TestOnceTokenFromClock: a token is at least the Redis clock in
// microseconds, and the counter holds it; a counter that was lost
// (deleted here, as expiry or FLUSHALL would) gives a token above every
// one drawn before.
func TestOnceTokenFromClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	before := redisMicros(t, o.client)
	var tokens []int64
	for range 5 {
		tokens = append(tokens, o.claimAndRelease(t, "m"))
	}
	require.GreaterOrEqual(t, tokens[0], before, "drawn from the clock")
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1])
	}
	v, err := o.client.Do(ctx, o.client.B().Get().Key(o.fenceKey("m")).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, tokens[len(tokens)-1], v, "the counter holds the last token")

	require.NoError(t, o.client.Do(ctx, o.client.B().Del().Key(o.fenceKey("m")).Build()).Error())
	require.Greater(t, o.claimAndRelease(t, "m"), tokens[len(tokens)-1], "above the tokens of the lost counter")
}

// TestOnceClaimAbove: a floor above the clock makes the token larger than
// it, and lifts the counter so that later claims stay above it; a floor
// outside 0..MaxToken-1 is refused.
func TestOnceClaimAbove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	floor := redisMicros(t, o.client) + int64(time.Hour/time.Microsecond)
	c, err := o.ClaimAbove(ctx, "m", time.Minute, floor)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, c.Status)
	require.Equal(t, floor+1, c.Token)
	require.NoError(t, o.Release(ctx, "m", c.Token))
	require.Equal(t, floor+2, o.claimAndRelease(t, "m"), "later claims go on above the floor")

	low, err := o.ClaimAbove(ctx, "m", time.Minute, 5)
	require.NoError(t, err)
	require.Equal(t, floor+3, low.Token, "a floor below the counter changes nothing")

	for _, bad := range []int64{-1, atomicop.MaxToken, atomicop.MaxToken + 1} {
		_, err := o.ClaimAbove(ctx, "n", time.Minute, bad)
		require.ErrorIs(t, err, atomicop.ErrInvalidToken, "floor %d", bad)
	}
	require.False(t, o.markExists(t, "n"))
}

// TestOnceTokensWithAnOlderBuild: during a rolling upgrade a build that
// draws tokens with INCR of the counter shares it: a counter it left small
// gives a token from the clock, and its INCR after a claim of this build
// goes on above that claim's token, as the next claim of this build goes
// on above its.
func TestOnceTokensWithAnOlderBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOnce(t)
	c := o.client
	require.NoError(t, c.Do(ctx, c.B().Set().Key(o.fenceKey("m")).Value("41").Build()).Error())
	first := o.claimAndRelease(t, "m")
	require.Greater(t, first, int64(41))
	old, err := c.Do(ctx, c.B().Incr().Key(o.fenceKey("m")).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, first+1, old, "the older build's draw goes on from this one's")
	require.Greater(t, o.claimAndRelease(t, "m"), old)
}
