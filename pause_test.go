package hongbao_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

func grabOutcome(t *testing.T, eng *hongbao.Engine, id, user string) hongbao.Grant {
	t.Helper()
	g, err := eng.Grab(context.Background(), id, user)
	require.NoError(t, err)
	return g
}

// TestPauseAnswersPaused: a paused campaign answers Paused to users
// without a packet and the packet to holders, touching no pool; pause
// and resume are idempotent; closing a paused campaign works.
func TestPauseAnswersPaused(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, Split: "fixed"})
	held := grabOutcome(t, eng, c.ID, "u1")
	require.Equal(t, hongbao.Granted, held.Outcome)

	st, err := eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 1, st.PausedShards)
	require.Equal(t, hongbao.StateOpen, st.State)
	st, err = eng.Pause(ctx, c.ID)
	require.NoError(t, err, "pausing twice")
	require.True(t, st.Paused)

	g := grabOutcome(t, eng, c.ID, "u1")
	require.Equal(t, hongbao.Already, g.Outcome)
	require.Equal(t, held.Seq, g.Seq)
	for i := 2; i < 30; i++ {
		g := grabOutcome(t, eng, c.ID, "u"+strconv.Itoa(i))
		require.Equal(t, hongbao.Paused, g.Outcome)
		require.Equal(t, "paused", g.Outcome.String())
		require.Zero(t, g.Seq)
	}
	st, err = eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.GrantedCount)
	require.EqualValues(t, 9, st.RemainingCount, "the pool was not touched")

	st, err = eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Zero(t, st.PausedShards)
	_, err = eng.Resume(ctx, c.ID)
	require.NoError(t, err, "resuming twice")
	require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "u2").Outcome)

	_, err = eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	st, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err, "closing a paused campaign")
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.Closed, grabOutcome(t, eng, c.ID, "u3").Outcome, "closed wins over paused")
	require.Equal(t, hongbao.Already, grabOutcome(t, eng, c.ID, "u2").Outcome)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)

	_, err = eng.Pause(ctx, "no-such-campaign")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	_, err = eng.Resume(ctx, "no-such-campaign")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
}

// TestPauseKeepsTheWindow: a paused campaign still opens and closes by
// its window: NotOpen before, Closed after, Paused only in between.
func TestPauseKeepsTheWindow(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	opens := time.Now().Add(time.Second)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, OpensAt: opens, ClosesAt: opens.Add(time.Second)})
	_, err := eng.Pause(ctx, c.ID)
	require.NoError(t, err, "a scheduled campaign can be paused")
	g := grabOutcome(t, eng, c.ID, "u1")
	if time.Now().Before(opens) { // else a loaded machine took the second: nothing to check
		require.Equal(t, hongbao.NotOpen, g.Outcome)
	}
	require.Eventually(t, func() bool {
		return grabOutcome(t, eng, c.ID, "u1").Outcome == hongbao.Paused
	}, 5*time.Second, 20*time.Millisecond, "open and paused")
	require.Eventually(t, func() bool {
		return grabOutcome(t, eng, c.ID, "u1").Outcome == hongbao.Closed
	}, 5*time.Second, 20*time.Millisecond, "closed on time while paused")
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.CloseTime, st.CloseReason)
	require.True(t, st.Paused)
	require.Zero(t, st.GrantedCount)
}

// TestPauseSharded defines a sharded pause: each shard answers Paused
// from its own flag. A shard not yet written (here: a pause stopped after
// one shard, as a crash would leave it) still grants; Status says how
// many shards are paused; Pause again finishes it, and after it returns
// no shard grants. Resume lets every shard grant again.
func TestPauseSharded(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	const shards = 4
	c := create(t, eng, hongbao.Spec{Total: 400_000, Count: 4000, Shards: shards})
	store := redisstore.New(r.Client)
	layout := redisstore.Default.Layout(c.ID, shards)
	users := make([][]string, shards)
	for k := range users {
		users[k] = usersHomedOn("k"+strconv.Itoa(k)+"-", 4, shards, k)
	}

	gen, err := store.PauseGen(ctx, layout[0], 0)
	require.NoError(t, err)
	_, err = store.Pause(ctx, layout[2], true, gen)
	require.NoError(t, err)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused, "the root is written last")
	require.Equal(t, 1, st.PausedShards)
	for k := range shards {
		want := hongbao.Granted
		if k == 2 {
			want = hongbao.Paused
		}
		require.Equal(t, want, grabOutcome(t, eng, c.ID, users[k][0]).Outcome, "shard %d", k)
	}

	st, err = eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, shards, st.PausedShards)
	for k := range shards {
		require.Equal(t, hongbao.Paused, grabOutcome(t, eng, c.ID, users[k][1]).Outcome, "shard %d", k)
		if k != 2 {
			require.Equal(t, hongbao.Already, grabOutcome(t, eng, c.ID, users[k][0]).Outcome, "shard %d", k)
		}
	}

	st, err = eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Zero(t, st.PausedShards)
	for k := range shards {
		require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, users[k][2]).Outcome, "shard %d", k)
	}
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
}

// TestPauseIsAtomicWithGrabs: grabs run without pause from many
// goroutines while Pause is called; no grab that started after Pause
// returned is granted, and the counters stop where the last grant left
// them.
func TestPauseIsAtomicWithGrabs(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 10_000_000, Count: 100_000, Shards: shards})
		var paused atomic.Bool
		var next atomic.Int64
		var lateGrants, afterPause, granted atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					after := paused.Load()
					g, err := eng.Grab(ctx, c.ID, "a"+strconv.FormatInt(next.Add(1), 10))
					if err != nil {
						t.Error(err)
						return
					}
					if g.Outcome == hongbao.Granted {
						granted.Add(1)
						if after {
							lateGrants.Add(1)
						}
					}
					if after {
						afterPause.Add(1)
					}
				}
			}()
		}
		require.Eventually(t, func() bool { return granted.Load() > 200 }, 10*time.Second, time.Millisecond)
		_, err := eng.Pause(ctx, c.ID)
		require.NoError(t, err)
		paused.Store(true)
		require.Eventually(t, func() bool { return afterPause.Load() > 500 }, 10*time.Second, time.Millisecond)
		close(stop)
		wg.Wait()
		require.Zero(t, lateGrants.Load(), "%d shards: grants started after the pause returned", shards)
		st, err := eng.Status(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, granted.Load(), st.GrantedCount, "%d shards", shards)
		a, err := eng.Audit(ctx, c.ID)
		require.NoError(t, err)
		require.True(t, a.OK(), "audit: %v", a.Problems)
	}
}

// TestBlockUsers: a blocked user without a packet is answered Blocked, a
// blocked holder still gets its packet; unblocking lets the user grab;
// the list and the count follow, on one shard and on several.
func TestBlockUsers(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	for _, shards := range []int{1, 4} {
		c := create(t, eng, hongbao.Spec{Total: 100_000, Count: 1000, Shards: shards})
		require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "holder").Outcome)
		bad := []string{"holder", "bad1", "bad2", "bad3", "bad4", "bad5", "bad1"}
		n, err := eng.Block(ctx, c.ID, bad)
		require.NoError(t, err)
		require.Equal(t, 6, n, "%d shards", shards)
		n, err = eng.Block(ctx, c.ID, []string{"bad1"})
		require.NoError(t, err)
		require.Zero(t, n, "blocking twice")

		require.Equal(t, hongbao.Already, grabOutcome(t, eng, c.ID, "holder").Outcome)
		for _, u := range bad[1:] {
			g := grabOutcome(t, eng, c.ID, u)
			require.Equal(t, hongbao.Blocked, g.Outcome, "%s, %d shards", u, shards)
			require.Equal(t, "blocked", g.Outcome.String())
		}
		require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "good").Outcome)

		list, err := eng.BlockedUsers(ctx, c.ID)
		require.NoError(t, err)
		var names []string
		for _, b := range list {
			names = append(names, b.User)
			require.WithinDuration(t, time.Now(), b.Since, time.Minute)
		}
		require.Equal(t, []string{"bad1", "bad2", "bad3", "bad4", "bad5", "holder"}, names)
		st, err := eng.Status(ctx, c.ID)
		require.NoError(t, err)
		require.EqualValues(t, 6, st.BlockedUsers)
		require.EqualValues(t, 2, st.GrantedCount)

		n, err = eng.Unblock(ctx, c.ID, []string{"bad2", "nobody"})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "bad2").Outcome)
		require.Equal(t, hongbao.Blocked, grabOutcome(t, eng, c.ID, "bad3").Outcome)
		_, err = eng.Unblock(ctx, c.ID, []string{"bad1", "bad3", "bad4", "bad5", "holder"})
		require.NoError(t, err)
		st, err = eng.Status(ctx, c.ID)
		require.NoError(t, err)
		require.Zero(t, st.BlockedUsers)
		require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "bad3").Outcome)

		_, err = eng.Block(ctx, c.ID, nil)
		require.ErrorIs(t, err, hongbao.ErrInvalidID)
		_, err = eng.Block(ctx, c.ID, []string{"bad user"})
		require.ErrorIs(t, err, hongbao.ErrInvalidID)
		_, err = eng.Block(ctx, "no-such-campaign", []string{"u"})
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	}
}

// TestBlockedInOneBatch drives grab.lua with a batch that mixes blocked
// users (one repeated), a blocked holder and free users: each answer is
// its user's own, and only the free users take packets.
func TestBlockedInOneBatch(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, Split: "fixed"})
	require.Equal(t, hongbao.Granted, grabOutcome(t, eng, c.ID, "h").Outcome)
	_, err := eng.Block(ctx, c.ID, []string{"h", "x", "y"})
	require.NoError(t, err)
	store := redisstore.New(r.Client)
	users := []string{"x", "a", "h", "x", "b", "a", "y"}
	out := make([]redisstore.GrabResult, len(users))
	require.NoError(t, store.Grab(ctx, redisstore.GrabKeys(redisstore.Default.CampaignKeys(c.ID)), 1, users, out))
	want := []int{redisstore.Blocked, redisstore.Granted, redisstore.Already, redisstore.Blocked, redisstore.Granted, redisstore.Already, redisstore.Blocked}
	for i, o := range out {
		require.Equal(t, want[i], o.Outcome, "user %d %s", i, users[i])
	}
	require.Equal(t, out[1].Seq, out[5].Seq)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.GrantedCount)
	require.EqualValues(t, 7, st.RemainingCount)
}

// TestDiscountPauseAndBlock: a paused discount campaign answers a new
// order ReservePaused, the order's own reservation as before, and
// confirms go on; a blocked user's new order is ReserveBlocked.
func TestDiscountPauseAndBlock(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 100_000, Quota: 800, Min: 1, Max: 500, Seed: seed(1), Shards: shards})
		r, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 3000)
		require.NoError(t, err)
		require.Equal(t, hongbao.Reserved, r.Outcome)

		st, err := eng.Discounts().Pause(ctx, d.ID)
		require.NoError(t, err)
		require.True(t, st.Paused)
		require.Equal(t, shards, st.PausedShards)
		again, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 3000)
		require.NoError(t, err)
		require.Equal(t, hongbao.ReservedAlready, again.Outcome)
		p, err := eng.Discounts().Reserve(ctx, d.ID, "bob", "o-2", 3000)
		require.NoError(t, err)
		require.Equal(t, hongbao.ReservePaused, p.Outcome)
		require.Equal(t, "paused", p.Outcome.String())
		require.False(t, p.Outcome.HasAmount())
		c, err := eng.Discounts().Confirm(ctx, d.ID, "alice", "o-1")
		require.NoError(t, err, "confirms go on while paused")
		require.Equal(t, hongbao.Confirmed, c.State)

		st, err = eng.Discounts().Resume(ctx, d.ID)
		require.NoError(t, err)
		require.False(t, st.Paused)
		n, err := eng.Discounts().Block(ctx, d.ID, []string{"bob", "carol"})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		b, err := eng.Discounts().Reserve(ctx, d.ID, "bob", "o-3", 3000)
		require.NoError(t, err)
		require.Equal(t, hongbao.ReserveBlocked, b.Outcome)
		require.Equal(t, "blocked", b.Outcome.String())
		list, err := eng.Discounts().BlockedUsers(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, list, 2)
		_, err = eng.Discounts().Unblock(ctx, d.ID, []string{"bob"})
		require.NoError(t, err)
		ok, err := eng.Discounts().Reserve(ctx, d.ID, "bob", "o-4", 3000)
		require.NoError(t, err)
		require.Equal(t, hongbao.Reserved, ok.Outcome)
		st, err = eng.Discounts().Status(ctx, d.ID)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.BlockedUsers)
		requireAudit(t, eng, d.ID)

		_, err = eng.Discounts().Pause(ctx, "no-such-discount")
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	}
}
