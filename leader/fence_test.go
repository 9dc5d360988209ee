package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
)

// record is a durable record of a lease's tokens, as Config.Fence asks
// of one: it takes a token above the one it holds and refuses any other.
// down makes it unreachable.
type tokenRecord struct {
	mu       sync.Mutex
	token    int64
	down     bool
	missed   int     // calls while down
	refused  []int64 // tokens refused
	accepted []int64 // tokens taken
}

func (r *tokenRecord) fence(_ context.Context, t leader.Term) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.down:
		r.missed++
		return errors.New("the record is out of reach")
	case t.Token <= r.token:
		r.refused = append(r.refused, t.Token)
		return &leader.StaleTokenError{Token: t.Token, Recorded: r.token}
	}
	r.token = t.Token
	r.accepted = append(r.accepted, t.Token)
	return nil
}

func (r *tokenRecord) misses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.missed
}

func (r *tokenRecord) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *tokenRecord) state() (token int64, refused, accepted []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token, append([]int64(nil), r.refused...), append([]int64(nil), r.accepted...)
}

// redisMicros reads the Redis clock in microseconds since the epoch.
func redisMicros(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	now, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return now[0]*1_000_000 + now[1]
}

// TestFenceRefusesStaleToken: the record holds a token above any the
// Redis clock gives now (a clock behind, a counter lost): the first term's
// token is refused and its work never runs; the Elector claims again above
// the record, and works under that token. Tokens drawn later stay above
// the record too.
func TestFenceRefusesStaleToken(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	name := testenv.UniqueID(t)
	rec := &tokenRecord{token: redisMicros(t, c) + int64(time.Hour/time.Microsecond)}
	forced := rec.token
	w := newWatch(t)
	e := start(t, leader.Config{Redis: c, Name: name, TTL: time.Minute, RenewEvery: 20 * time.Millisecond,
		Fence: rec.fence, OnElected: w.onElected("a")})
	eventually(t, 10*time.Second, "no work under a proven token", func() bool { return w.count() == 1 })
	require.True(t, e.IsLeader())
	got, refused, accepted := rec.state()
	require.NotEmpty(t, refused, "the first token was refused")
	for _, r := range refused {
		require.LessOrEqual(t, r, forced)
	}
	require.Equal(t, []int64{forced + 1}, accepted, "claimed again just above the record")
	require.Equal(t, got, w.at(0).token, "the work runs under the proven token only")

	e.Stop()
	require.Greater(t, elect(t, c, name), forced, "later tokens stay above the record")
}

// TestFenceWaitsForTheRecord: while the record cannot be reached the
// work does not start and IsLeader is false, though the lease is held;
// once the record answers, the work starts under the token it took.
func TestFenceWaitsForTheRecord(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	name := testenv.UniqueID(t)
	rec := &tokenRecord{down: true}
	w := newWatch(t)
	e := start(t, leader.Config{Redis: c, Name: name, TTL: time.Minute, RenewEvery: 20 * time.Millisecond,
		Fence: rec.fence, OnElected: w.onElected("a")})
	watcher, err := leader.New(leader.Config{Redis: c, Name: name, Logger: quiet()})
	require.NoError(t, err)
	var h leader.Holder
	eventually(t, 5*time.Second, "the lease not taken", func() bool {
		h, err = watcher.Holder(context.Background())
		require.NoError(t, err)
		return h.Token != 0
	})
	// The record is asked again every renewal; three tries go by.
	eventually(t, 5*time.Second, "the record not asked again", func() bool {
		require.False(t, e.IsLeader(), "not the leader before the token is proven")
		require.Zero(t, w.count(), "no work before the token is proven")
		return rec.misses() >= 3
	})
	rec.setDown(false)
	eventually(t, 5*time.Second, "the work did not start", func() bool { return w.count() == 1 })
	require.True(t, e.IsLeader())
	require.Equal(t, h.Token, w.at(0).token)
}
