package hongbao_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/split"
)

// usersHomedOn returns n user ids whose home, among shards, is home.
func usersHomedOn(prefix string, n, shards, home int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		u := prefix + strconv.Itoa(i)
		if hongbao.HomeShard(u, shards) == home {
			out = append(out, u)
		}
	}
	return out
}

// rain has every user grab clicks times at once, from workers goroutines,
// and returns each user's answers.
func rain(t *testing.T, eng *hongbao.Engine, id string, users []string, clicks, workers int) map[string][]hongbao.Grant {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	got := make(map[string][]hongbao.Grant, len(users))
	next := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				g, err := eng.Grab(ctx, id, u)
				if !assert.NoError(t, err) {
					continue
				}
				mu.Lock()
				got[u] = append(got[u], g)
				mu.Unlock()
			}
		}()
	}
	for c := 0; c < clicks; c++ {
		for _, u := range users {
			next <- u
		}
	}
	close(next)
	wg.Wait()
	return got
}

// checkOnePacketEach requires every user's answers to name one packet at
// most, no packet twice, and returns the packets granted.
func checkOnePacketEach(t *testing.T, got map[string][]hongbao.Grant) map[int64]string {
	t.Helper()
	owner := map[int64]string{}
	for u, gs := range got {
		var held int64
		for _, g := range gs {
			require.Equal(t, u, g.User)
			if !g.Outcome.HasPacket() {
				continue
			}
			if held == 0 {
				held = g.Seq
			}
			require.Equal(t, held, g.Seq, "user %s was told two packets", u)
		}
		if held != 0 {
			other, dup := owner[held]
			require.False(t, dup, "packet %d to %s and %s", held, other, u)
			owner[held] = u
		}
	}
	return owner
}

// TestShardedRainUnevenHomes: every user is homed on shard 0 of 4, so
// three quarters of the packets must move there; every packet is granted,
// once, and the campaign ends sold out.
func TestShardedRainUnevenHomes(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	const packets, shards = 2000, 4
	c := create(t, eng, hongbao.Spec{Total: 200_000, Count: packets, Shards: shards})
	require.Equal(t, shards, c.Shards)
	users := usersHomedOn("skew-", 3000, shards, 0)

	got := rain(t, eng, c.ID, users, 2, 64)
	owner := checkOnePacketEach(t, got)
	require.Len(t, owner, packets, "every packet granted although the users' homes hold a quarter")

	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)
	require.EqualValues(t, packets, st.GrantedCount)
	require.EqualValues(t, 200_000, st.GrantedCents)
	require.Zero(t, st.RemainingCount)
	require.Equal(t, shards, st.Shards)
	require.NotZero(t, eng.Stats().Transfers)

	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)

	// Later grabs: holders get their packet again, the rest are sold out.
	for _, u := range users[:50] {
		g, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		if seq := got[u][0].Seq; got[u][0].Outcome.HasPacket() {
			require.Equal(t, hongbao.Already, g.Outcome)
			require.Equal(t, seq, g.Seq)
		} else {
			require.Equal(t, hongbao.SoldOut, g.Outcome)
		}
	}
}

// TestShardedRainEvenHomes: users spread over 8 shards, more packets than
// users: every user gets one packet, and a later grab answers the same.
func TestShardedRainEvenHomes(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 1_000_000, Count: 5000, Shards: 8})
	users := make([]string, 3000)
	for i := range users {
		users[i] = "even-" + strconv.Itoa(i)
	}
	got := rain(t, eng, c.ID, users, 3, 64)
	owner := checkOnePacketEach(t, got)
	require.Len(t, owner, len(users), "every user got a packet")
	for _, u := range users[:20] {
		g, err := eng.Held(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, got[u][0].Seq, g.Seq)
	}
	_, err := eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 5000-len(users), a.PoolCount)
}

// TestShardedSpecErrors: a clear error naming the limit.
func TestShardedSpecErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shards, count int
		want          string
	}{
		{-1, 10, "within 1..256"},
		{257, 1000, "within 1..256"},
		{11, 10, "11 shards need at least as many packets, got 10"},
	} {
		err := hongbao.Spec{Total: 1000, Count: tc.count, Shards: tc.shards}.Validate()
		var se *hongbao.SpecError
		require.ErrorAs(t, err, &se)
		require.Equal(t, "shards", se.Field)
		require.Contains(t, se.Error(), tc.want)
		require.ErrorIs(t, err, hongbao.ErrInvalidSpec)
	}
	require.NoError(t, hongbao.Spec{Total: 1000, Count: 10, Shards: 10}.Validate())
}

// TestShardedLayoutLearned: an engine that met a campaign with one shard
// count routes correctly after the id is created again with another (a
// second process, or keys expired and a new campaign made).
func TestShardedLayoutLearned(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	grabber, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	creator, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	id := testenv.UniqueID(t)
	del := func(shards int) {
		for _, k := range redisstore.Default.Layout(id, shards) {
			require.NoError(t, r.Client.Do(ctx, r.Client.B().Del().Key(k.Meta, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied).Build()).Error())
		}
	}
	for _, shards := range []int{1, 4, 2, 1, 3} {
		_, err := creator.Create(ctx, hongbao.Spec{ID: id, Total: 10_000, Count: 100, Shards: shards, Split: split.Fixed})
		require.NoError(t, err)
		users := make([]string, 30)
		for i := range users {
			users[i] = "l" + strconv.Itoa(shards) + "-" + strconv.Itoa(i)
		}
		got := rain(t, grabber, id, users, 2, 8)
		require.Len(t, checkOnePacketEach(t, got), len(users), "shards %d", shards)
		a, err := creator.Audit(ctx, id)
		require.NoError(t, err)
		require.True(t, a.OK(), "shards %d: %v", shards, a.Problems)
		del(shards)
	}
}

// TestInterruptedShardedCreate: a create that activated some shards and
// died before the root can be run again, and yields one whole campaign.
func TestInterruptedShardedCreate(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	id := testenv.UniqueID(t)
	const shards = 3
	layout := redisstore.Default.Layout(id, shards)
	// Shard 2 alone went live, with an empty share of a campaign that
	// never existed; the root was loading.
	b, err := store.Begin(ctx, layout[0], redisstore.Loader{Token: "crashed"}, redisstore.Meta{Share: &redisstore.ShardShare{Shards: 3, Shard: 0}, Terms: &redisstore.Terms{Total: 600, Count: 6}})
	require.NoError(t, err)
	_, err = store.Begin(ctx, layout[2], redisstore.Loader{Token: "crashed", Epoch: b.Epoch}, redisstore.Meta{Share: &redisstore.ShardShare{Shards: 3, Shard: 2, BaseCount: 2, BaseCents: 200}})
	require.NoError(t, err)
	require.NoError(t, store.Load(ctx, layout[2], "crashed", 3, 3, []int64{100, 100}, nil))
	_, err = store.Activate(ctx, layout[2], "crashed", 0, 0, 60_000)
	require.NoError(t, err)

	c, err := eng.Create(ctx, hongbao.Spec{ID: id, Total: 600, Count: 6, Shards: shards, Split: split.Fixed})
	require.NoError(t, err)
	require.Equal(t, hongbao.StateOpen, c.State)
	a, err := eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 6, a.PoolCount)

	// A live campaign is never loaded over.
	_, err = eng.Create(ctx, hongbao.Spec{ID: id, Total: 600, Count: 6, Shards: shards})
	require.ErrorIs(t, err, hongbao.ErrCampaignExists)
}

// TestTransferStepsAreIdempotent walks a transfer through its steps, with
// a crash after each, and requires the audit and the recovery to account
// for every packet at every point.
func TestTransferStepsAreIdempotent(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	c := create(t, eng, hongbao.Spec{Total: 100_000, Count: 1000, Shards: 2})
	layout := redisstore.Default.Layout(c.ID, 2)
	audit := func(inFlight int64) {
		t.Helper()
		a, err := eng.Audit(ctx, c.ID)
		require.NoError(t, err)
		require.True(t, a.OK(), "audit: %v", a.Problems)
		require.Equal(t, inFlight, a.InFlightCount)
		require.EqualValues(t, 1000, a.PoolCount+a.InFlightCount)
	}

	// Died after step 1: the packets are in the record only.
	t1, err := store.TakeTransfer(ctx, layout[1], 0, 100)
	require.NoError(t, err)
	require.Len(t, t1.Packets, 100)
	audit(100)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 100, st.InFlight)
	require.EqualValues(t, 1000, st.RemainingCount)

	// Died after step 2: applied, the record still there.
	t2, err := store.TakeTransfer(ctx, layout[0], 1, 50)
	require.NoError(t, err)
	n, err := store.ApplyTransfer(ctx, layout[1], t2)
	require.NoError(t, err)
	require.EqualValues(t, 50, n)
	audit(100)

	// A second apply is a no-op; recovery finishes both.
	n, err = store.ApplyTransfer(ctx, layout[1], t2)
	require.NoError(t, err)
	require.Zero(t, n)
	done, err := store.Recover(ctx, layout, 0)
	require.NoError(t, err)
	require.Equal(t, 2, done)
	audit(0)
	done, err = store.Recover(ctx, layout, 0)
	require.NoError(t, err)
	require.Zero(t, done)

	// The pools are 550 and 450 now; a closed shard lends nothing.
	lens, err := store.PoolLengths(ctx, layout)
	require.NoError(t, err)
	require.Equal(t, []int64{550, 450}, lens)
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	t3, err := store.TakeTransfer(ctx, layout[0], 1, 10)
	require.NoError(t, err)
	require.Empty(t, t3.Packets)
}
