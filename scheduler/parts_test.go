package scheduler_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

const partsTTL = 600 * time.Millisecond

// startParts starts a scheduler of parts parts named consumer on rc.
func (f *fixture) startParts(t *testing.T, rc rueidis.Client, consumer string, parts int) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{
		Settle: settle.Config{Redis: rc, Ledger: f.led, Consumer: consumer, IdlePoll: 50 * time.Millisecond,
			ReclaimIdle: time.Hour}, // only the takeover sweep can move a dead holder's entries
		Parts: parts, LeaseTTL: partsTTL, Logger: quiet(),
	})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return s
}

// balanced waits until the schedulers hold every one of parts parts, each
// part once, each scheduler its share (parts/n rounded down or up).
func balanced(t *testing.T, parts int, ss ...*scheduler.Scheduler) {
	t.Helper()
	waitFor(t, "the parts to be shared out", 20*time.Second, func() bool {
		seen := map[int]bool{}
		for _, s := range ss {
			held := s.HeldParts()
			if len(held) < parts/len(ss) || len(held) > (parts+len(ss)-1)/len(ss) {
				return false
			}
			for _, k := range held {
				if seen[k] {
					return false
				}
				seen[k] = true
			}
		}
		return len(seen) == parts
	})
}

// grabAll grabs campaign id for users u0..u<users-1>, 32 at a time
// through the engine, and returns the cents granted.
func grabAll(t *testing.T, eng *hongbao.Engine, id string, users int) int64 {
	t.Helper()
	var mu sync.Mutex
	var granted, count int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				g, err := eng.Grab(context.Background(), id, "u"+strconv.Itoa(u))
				if err == nil && g.Outcome == hongbao.Granted {
					mu.Lock()
					granted += g.Cents
					count++
					mu.Unlock()
				}
			}
		}()
	}
	for u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	require.EqualValues(t, users, count, "every user granted")
	return granted
}

// TestPartsShareOneCampaign: two, then three schedulers of 16 parts on one
// Redis share the parts of an 8-shard campaign: each holds its own, each
// settles grants, and together they settle every grant once (the ledger's
// totals are Redis's counters, no conflict, no replay) and refund once.
func TestPartsShareOneCampaign(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := t.Context()
			var ss []*scheduler.Scheduler
			for i := range n {
				ss = append(ss, f.startParts(t, f.redis.Client, fmt.Sprintf("p%d", i), 16))
			}
			balanced(t, 16, ss...)
			const shards, packets = 8, 2000
			c, err := f.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10 * packets, Count: packets, Shards: shards})
			require.NoError(t, err)
			granted := grabAll(t, f.eng, c.ID, 1500)
			_, err = f.eng.CloseCampaign(ctx, c.ID)
			require.NoError(t, err)
			waitFor(t, "the campaign settled and refunded", 30*time.Second, func() bool {
				st, err := f.eng.Status(ctx, c.ID)
				var refunds int64
				for _, s := range ss {
					refunds += s.Worker().Stats().Refunds
				}
				return err == nil && st.State == hongbao.StateSettled && refunds > 0
			})
			tot, err := f.led.Totals(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, granted, tot.GrantCents)
			require.Equal(t, 10*packets-granted, tot.Refunded)
			var refunds, grants int64
			for i, s := range ss {
				st := s.Worker().Stats()
				require.Zero(t, st.Conflicts)
				require.Positive(t, st.Grants, "process %d settled nothing: the parts were not shared", i)
				refunds += st.Refunds
				grants += st.Grants
				t.Logf("process %d: parts %v, %d grants", i, s.HeldParts(), st.Grants)
			}
			require.EqualValues(t, 1, refunds, "the refund once, by the root's holder")
			require.EqualValues(t, 1500, grants, "every grant written once, by one process")
			rep, err := settle.Reconcile(ctx, f.redis.Client, "", f.led, c.ID)
			require.NoError(t, err)
			require.True(t, rep.OK, "%v", rep.Differences)
		})
	}
}

// TestPartsMoveFromDeadProcess: a process of two dies (its Redis
// connection cut: it can neither renew nor release) with grants read and
// unsettled at its consumer. Its parts move to the survivor within about
// the lease TTL, and the survivor settles those pending entries at once
// (ReclaimIdle is an hour here), then the rest, and the refund.
func TestPartsMoveFromDeadProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	proxy := testenv.NewProxy(t, f.redis.Addr)
	doomedClient := testenv.Client(t, proxy.Addr)
	doomed := f.startParts(t, doomedClient, "doomed", 8)
	survivor := f.startParts(t, f.redis.Client, "survivor", 8)
	balanced(t, 8, doomed, survivor)

	const shards, packets = 4, 600
	c, err := f.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10 * packets, Count: packets, Shards: shards})
	require.NoError(t, err)
	// The doomed process's shards, as it holds them now.
	var mine []int
	for k := range shards {
		for _, p := range doomed.HeldParts() {
			if settle.PartOf(c.ID, k, 8) == p {
				mine = append(mine, k)
			}
		}
	}
	require.NotEmpty(t, mine)
	proxy.Cut() // dead from here on: nothing it does reaches Redis
	granted := grabAll(t, f.eng, c.ID, 300)
	// What it would have read before dying: delivered to its consumer,
	// never acknowledged.
	store := redisstore.New(f.redis.Client)
	layout := redisstore.Default.Layout(c.ID, shards)
	pending := 0
	for _, k := range mine {
		es, err := store.ReadGroup(ctx, layout[k], "doomed", 1000, false)
		require.NoError(t, err)
		pending += len(es)
	}
	require.Positive(t, pending)
	died := time.Now()
	_, err = f.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	waitFor(t, "the campaign settled and refunded by the survivor", 20*time.Second, func() bool {
		st, err := f.eng.Status(ctx, c.ID)
		return err == nil && st.State == hongbao.StateSettled && survivor.Worker().Stats().Refunds > 0
	})
	took := time.Since(died)
	tot, err := f.led.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, granted, tot.GrantCents)
	require.Equal(t, 10*packets-granted, tot.Refunded)
	t.Logf("%d entries pending at the dead process; settled %s after its death (lease TTL %s)", pending, took.Round(time.Millisecond), partsTTL)
	require.Less(t, took, 5*partsTTL, "the parts moved within about the lease TTL, not after ReclaimIdle")
	held := survivor.HeldParts()
	sort.Ints(held)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, held)
	st := survivor.Worker().Stats()
	require.EqualValues(t, 300, st.Grants)
	require.EqualValues(t, 1, st.Refunds)
	require.Zero(t, st.Conflicts)
}

// TestPartsRefuseOtherCount: a process whose number of parts differs from
// a live one's is refused at Start, whichever counts one part.
func TestPartsRefuseOtherCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startParts(t, f.redis.Client, "sixteen", 16)
	for _, parts := range []int{8, 1} {
		s, err := scheduler.New(scheduler.Config{Settle: settle.Config{Redis: f.redis.Client, Ledger: f.led, Consumer: "other"},
			Parts: parts, LeaseTTL: partsTTL, Logger: quiet()})
		require.NoError(t, err)
		require.ErrorIs(t, s.Start(context.Background()), scheduler.ErrParts, "%d parts next to 16", parts)
		s.Stop()
	}

	g := newFixture(t)
	one := g.startParts(t, g.redis.Client, "one", 1)
	waitFor(t, "the single lease", 10*time.Second, one.IsLeader)
	s, err := scheduler.New(scheduler.Config{Settle: settle.Config{Redis: g.redis.Client, Ledger: g.led, Consumer: "other"},
		Parts: 16, LeaseTTL: partsTTL, Logger: quiet()})
	require.NoError(t, err)
	require.ErrorIs(t, s.Start(context.Background()), scheduler.ErrParts, "16 parts next to a process of one")
	s.Stop()
	require.Empty(t, s.HeldParts())
}

// TestPartsJoinAndLeave: a process alone holds every part; one that joins
// gets its share from it; when the first stops, it releases its parts at
// once and the other takes them within a round or two, not a TTL.
func TestPartsJoinAndLeave(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.startParts(t, f.redis.Client, "first", 8)
	balanced(t, 8, first)
	second := f.startParts(t, f.redis.Client, "second", 8)
	balanced(t, 8, first, second)
	first.Stop()
	require.Empty(t, first.HeldParts())
	stopped := time.Now()
	balanced(t, 8, second)
	took := time.Since(stopped)
	t.Logf("the parts of a process that stopped moved in %s (a round is %s)", took.Round(time.Millisecond), partsTTL/3)
	require.Less(t, took, partsTTL, "a stopped process's parts move at the next round, before its leases could run out")
}

// TestPartsShareDiscountCampaign: the parts cover discount campaigns too:
// two processes settle the confirms of a 4-shard discount campaign, each
// its shards, every confirmed discount once, and the leftover is refunded
// once.
func TestPartsShareDiscountCampaign(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	a := f.startParts(t, f.redis.Client, "a", 16)
	b := f.startParts(t, f.redis.Client, "b", 16)
	balanced(t, 16, a, b)
	const budget, users = 100_000, 200
	d, err := f.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: budget, Quota: 400,
		Max: 300, Shards: 4, Hold: hongbao.MinHold})
	require.NoError(t, err)
	for u := range users {
		user, order := "u"+strconv.Itoa(u), "o"+strconv.Itoa(u)
		r, err := f.eng.Discounts().Reserve(ctx, d.ID, user, order, 10_000)
		require.NoError(t, err)
		require.True(t, r.Outcome.HasAmount())
		_, err = f.eng.Discounts().Confirm(ctx, d.ID, user, order)
		require.NoError(t, err)
	}
	st, err := f.eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)
	confirmed := st.ConfirmedCents
	waitFor(t, "the discount campaign settled", 30*time.Second, func() bool {
		st, err := f.eng.Discounts().Status(ctx, d.ID)
		return err == nil && st.State == hongbao.StateSettled && a.Worker().Stats().Refunds+b.Worker().Stats().Refunds > 0
	})
	tot, err := f.led.Totals(ctx, ledger.DiscountCampaign(d.ID))
	require.NoError(t, err)
	require.EqualValues(t, users, tot.GrantCount)
	require.Equal(t, confirmed, tot.GrantCents)
	require.Equal(t, budget-confirmed, tot.Refunded)
	sa, sb := a.Worker().Stats(), b.Worker().Stats()
	require.Positive(t, sa.Discounts)
	require.Positive(t, sb.Discounts)
	require.EqualValues(t, users, sa.Discounts+sb.Discounts, "every confirmed discount written once")
	require.EqualValues(t, 1, sa.Refunds+sb.Refunds)
	require.Zero(t, sa.Conflicts+sb.Conflicts)
}
