package hongbao_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/atomicop"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

// onCluster is one real Redis Cluster of three masters, made by redis-cli
// --cluster create, shared by the subtests of TestOnCluster; each subtest
// uses campaign ids (and keys) of its own.
type onCluster struct {
	c   *testenv.Cluster
	eng *hongbao.Engine
}

// TestOnCluster runs hongbao on a real three-master Redis Cluster, through
// a client given one node's address: a campaign's whole life with one shard
// and with three (every campaign script), the keys outside campaigns
// (the campaign index, the request counter, atomicop's scripts and the
// leader's lease), a rain over three masters, a rain during which a
// shard's slot migrates to another master, and two deployments in two
// namespaces settling campaigns of the same id each into its own ledger.
func TestOnCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	eng, err := hongbao.New(hongbao.Config{Redis: c.Client})
	require.NoError(t, err)
	oc := &onCluster{c: c, eng: eng}
	t.Run("LifeOneShard", func(t *testing.T) { oc.life(t, 1) })
	t.Run("LifeThreeShards", func(t *testing.T) { oc.life(t, 3) })
	t.Run("KeysOutsideCampaigns", oc.outside)
	t.Run("RainOverThreeMasters", oc.rainOverMasters)
	t.Run("MigrationDuringRain", oc.migration)
	t.Run("PauseAndBlockOverThreeMasters", oc.pauseAndBlock)
	t.Run("TwoNamespaces", oc.twoNamespaces)
}

// pauseAndBlock: a campaign over three masters pauses on every one of
// them, blocks users on their own shards, and resumes; the blocked hash of
// every shard lives on the shard's master.
func (oc *onCluster) pauseAndBlock(t *testing.T) {
	ctx := context.Background()
	const shards = 3
	c, err := oc.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 30_000, Count: 300, Shards: shards})
	require.NoError(t, err)
	masters := oc.shardMasters(t, c.ID, shards)
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(masters))), shards, "one shard per master")
	st, err := oc.eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, shards, st.PausedShards)
	var bad []string
	for k := range shards {
		u := usersHomedOn("p", 2, shards, k)
		g, err := oc.eng.Grab(ctx, c.ID, u[0])
		require.NoError(t, err)
		require.Equal(t, hongbao.Paused, g.Outcome, "shard %d", k)
		bad = append(bad, u[1])
	}
	_, err = oc.eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	n, err := oc.eng.Block(ctx, c.ID, bad)
	require.NoError(t, err)
	require.Equal(t, shards, n)
	for k, u := range bad {
		g, err := oc.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Blocked, g.Outcome, "shard %d", k)
		g, err = oc.eng.Grab(ctx, c.ID, usersHomedOn("p", 1, shards, k)[0])
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome, "shard %d", k)
	}
	list, err := oc.eng.BlockedUsers(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, list, shards)
	oc.settleClean(t, c.ID, shards)
}

// shardMasters returns the master of each shard of campaign id, and
// requires every key of a shard to be on its master.
func (oc *onCluster) shardMasters(t *testing.T, id string, shards int) []string {
	t.Helper()
	ctx := context.Background()
	out := make([]string, shards)
	for k, keys := range redisstore.Default.Layout(id, shards) {
		m, err := oc.c.MasterOf(ctx, keys.Meta)
		require.NoError(t, err)
		for _, key := range []string{keys.Pool, keys.Claims, keys.Grants, keys.Dead, keys.Xfers, keys.Applied, keys.Blocked} {
			other, err := oc.c.MasterOf(ctx, key)
			require.NoError(t, err)
			require.Equal(t, m, other, "%s is on the master of its shard", key)
		}
		out[k] = m
	}
	return out
}

// refusing is a ledger that refuses, as invalid, every batch holding the
// grant of one user, until fixed: that grant's entry goes to the dead
// stream, and a redrive settles it once fixed.
type refusing struct {
	ledger.Ledger
	mu   sync.Mutex
	user string
}

func (r *refusing) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	r.mu.Lock()
	user := r.user
	r.mu.Unlock()
	for _, g := range gs {
		if g.User == user {
			return ledger.ApplyResult{}, fmt.Errorf("%w: user %q refused", ledger.ErrInvalid, user)
		}
	}
	return r.Ledger.ApplyGrants(ctx, c, gs)
}

func (r *refusing) fix() {
	r.mu.Lock()
	r.user = ""
	r.mu.Unlock()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sqliteLedger opens a SQLite ledger of its own for the test.
func sqliteLedger(t *testing.T) ledger.Ledger {
	t.Helper()
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// life runs one campaign of shards shards through its whole life on the
// cluster, through the public API: create, grabs (double clicks; with
// several shards every user is homed on shard 0, so packets move),
// settlement into SQLite while it is open, one entry refused by the
// ledger and dead-lettered, then redriven, close, audit, refund and a
// clean reconcile.
func (oc *onCluster) life(t *testing.T, shards int) {
	ctx := context.Background()
	eng := oc.eng
	const packets, users, total = 300, 200, 30_000
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: total, Count: packets, Shards: shards})
	require.NoError(t, err)
	masters := oc.shardMasters(t, c.ID, shards)
	slices.Sort(masters)
	require.Len(t, slices.Compact(masters), shards, "each shard on a master of its own")

	moves := eng.Stats().Transfers
	names := usersHomedOn("u", users, shards, 0)
	got := rain(t, eng, c.ID, names, 2, 16)
	owner := checkOnePacketEach(t, got)
	require.Len(t, owner, users, "every user got a packet")
	var cents int64
	for _, gs := range got {
		cents += gs[0].Cents
	}
	if shards > 1 {
		require.Greater(t, eng.Stats().Transfers, moves, "packets moved to the users' home shard")
	}
	h, err := eng.Held(ctx, c.ID, names[0])
	require.NoError(t, err)
	require.Equal(t, got[names[0]][0].Seq, h.Seq)
	ids, err := eng.Campaigns(ctx)
	require.NoError(t, err)
	require.Contains(t, ids, c.ID, "in the campaign index")

	l := sqliteLedger(t)
	led := &refusing{Ledger: l, user: names[7]}
	w, err := settle.New(settle.Config{Redis: oc.c.Client, Ledger: led, Consumer: "life", Only: []string{c.ID}, Logger: quiet(),
		ReclaimIdle: 200 * time.Millisecond, Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, oc.c.Client, "", l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	// The refused grant's stream entry (its grab batch) is dead-lettered,
	// the rest settled.
	require.Positive(t, rep.Dead, "the refused grant is dead-lettered")
	require.EqualValues(t, users, rep.GrantedLedger+rep.Dead)

	led.fix()
	n, err := w.Redrive(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, rep.Dead, n)
	st, err := eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, packets-users, a.PoolCount)

	_, err = w.Drain(ctx)
	require.NoError(t, err)
	st, err = eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Equal(t, total-cents, st.RefundedCents)
	rep, err = settle.Reconcile(ctx, oc.c.Client, "", l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.Equal(t, "settled", rep.State)
	require.EqualValues(t, users, rep.GrantedLedger)
	require.Equal(t, cents, rep.GrantedCentsLedger)
	require.Zero(t, rep.EscrowCents)
	ids, err = eng.Campaigns(ctx)
	require.NoError(t, err)
	require.NotContains(t, ids, c.ID, "a settled campaign leaves the index")
}

// outside: the keys that belong to no campaign work on a cluster too: the
// service-wide request counter, atomicop's scripts (update-if-newer, a
// batch in one slot, a batch over two refused; once-only delivery) and the
// leader's lease, with two electors.
func (oc *onCluster) outside(t *testing.T) {
	ctx := context.Background()
	sec := time.Now().Unix() + 1_000_000 // a second nobody else counts
	for _, step := range [][2]int64{{3, 3}, {4, 7}} {
		n, err := oc.eng.CountRequests(ctx, sec, step[0])
		require.NoError(t, err)
		require.Equal(t, step[1], n, "the count of second %d", sec)
	}

	v, err := atomicop.NewVersioned(oc.c.Client, &atomicop.VersionedConfig{Prefix: "t:" + testenv.UniqueID(t) + ":"})
	require.NoError(t, err)
	agg := &atomicop.Aggregate{Summary: "by-status", Field: "status"}
	rs, err := v.UpdateBatch(ctx, []atomicop.Update{
		{Key: "{fleet}a", Version: 10, Fields: map[string]string{"status": "on"}, Aggregate: agg},
		{Key: "{fleet}b", Version: 10, Fields: map[string]string{"status": "on"}, Aggregate: agg},
		{Key: "{fleet}a", Version: 9, Fields: map[string]string{"status": "off"}, Aggregate: agg},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, false}, []bool{rs[0].Applied, rs[1].Applied, rs[2].Applied})
	sum, err := v.Summary(ctx, "{fleet}a", "by-status")
	require.NoError(t, err)
	require.EqualValues(t, 2, sum["on"])
	_, err = v.UpdateBatch(ctx, []atomicop.Update{{Key: "{fleet}a", Version: 11}, {Key: "{other}a", Version: 11}})
	require.ErrorIs(t, err, atomicop.ErrCrossSlot)
	res, err := v.Update(ctx, atomicop.Update{Key: "lone", Version: 5, Fields: map[string]string{"x": "1"}})
	require.NoError(t, err)
	require.True(t, res.Applied)

	once, err := atomicop.NewOnce(oc.c.Client, &atomicop.OnceConfig{Prefix: "t:" + testenv.UniqueID(t) + ":"})
	require.NoError(t, err)
	claim, err := once.Claim(ctx, "msg-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Claimed, claim.Status)
	require.NoError(t, once.Extend(ctx, "msg-1", claim.Token, time.Minute))
	require.NoError(t, once.Done(ctx, "msg-1", claim.Token, time.Minute))
	again, err := once.Claim(ctx, "msg-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, atomicop.Delivered, again.Status)
	other, err := once.Claim(ctx, "msg-2", time.Minute)
	require.NoError(t, err)
	require.NoError(t, once.Release(ctx, "msg-2", other.Token))

	oc.electors(t)
}

// electors runs two electors of one lease on the cluster: one leads, and
// when it stops the other takes over.
func (oc *onCluster) electors(t *testing.T) {
	name := testenv.UniqueID(t)
	var es [2]*leader.Elector
	for i := range es {
		e, err := leader.New(leader.Config{Redis: oc.c.Client, Name: name, TTL: 300 * time.Millisecond, Logger: quiet()})
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		t.Cleanup(e.Stop)
		es[i] = e
	}
	leading := func() int {
		n := -1
		for i, e := range es {
			if e.IsLeader() {
				require.Equal(t, -1, n, "two leaders at once")
				n = i
			}
		}
		return n
	}
	waitCond(t, "a leader", func() bool { return leading() >= 0 })
	first := leading()
	es[first].Stop()
	waitCond(t, "the other takes over", func() bool { return leading() == 1-first })
}

// waitCond polls cond every 2 ms until it holds, failing after 10 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rainOverMasters: a campaign of three shards, one on each master (the
// layout puts shard k in the k-th third of the slots, which is what
// redis-cli --cluster create gives each master), sells out in a rain with
// every packet granted once and no user twice.
func (oc *onCluster) rainOverMasters(t *testing.T) {
	ctx := context.Background()
	const packets = 3000
	c, err := oc.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 300_000, Count: packets, Shards: 3})
	require.NoError(t, err)
	masters := oc.shardMasters(t, c.ID, 3)
	require.ElementsMatch(t, oc.c.Addrs(), masters, "one shard on each of the three masters")
	for _, n := range oc.c.Nodes {
		keys := 0
		for _, k := range redisstore.Default.Layout(c.ID, 3) {
			slot := strconv.Itoa(testenv.KeySlot(k.Meta))
			count, err := n.Client.Do(ctx, n.Client.B().Arbitrary("CLUSTER", "COUNTKEYSINSLOT", slot).Build()).AsInt64()
			require.NoError(t, err)
			keys += int(count)
		}
		require.Positive(t, keys, "%s holds keys of the campaign", n.Addr)
	}

	names := make([]string, packets+500)
	for i := range names {
		names[i] = "m" + strconv.Itoa(i)
	}
	got := rain(t, oc.eng, c.ID, names, 2, 64)
	owner := checkOnePacketEach(t, got)
	require.Len(t, owner, packets, "every packet granted, once")
	st, err := oc.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)
	require.EqualValues(t, 300_000, st.GrantedCents)
	a, err := oc.eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
}

// grabbers grab for users fed to them, each answer kept, retrying a grab
// that answered ErrBusy or ErrOutcomeUnknown (both safe to retry); any
// other error fails the test.
type grabbers struct {
	t       *testing.T
	eng     *hongbao.Engine
	id      string
	feed    chan string
	wg      sync.WaitGroup
	pending sync.WaitGroup
	busy    atomic.Int64 // ErrBusy answers
	unknown atomic.Int64 // ErrOutcomeUnknown answers
	mu      sync.Mutex
	got     map[string][]hongbao.Grant
}

func startGrabbers(t *testing.T, eng *hongbao.Engine, id string, n int) *grabbers {
	g := &grabbers{t: t, eng: eng, id: id, feed: make(chan string), got: map[string][]hongbao.Grant{}}
	for range n {
		g.wg.Add(1)
		go g.run()
	}
	return g
}

func (g *grabbers) run() {
	defer g.wg.Done()
	for u := range g.feed {
		g.grab(u)
		g.pending.Done()
	}
}

func (g *grabbers) grab(u string) {
	for {
		gr, err := g.eng.Grab(context.Background(), g.id, u)
		switch {
		case errors.Is(err, hongbao.ErrBusy):
			g.busy.Add(1)
		case errors.Is(err, hongbao.ErrOutcomeUnknown):
			g.unknown.Add(1)
		case err != nil:
			g.t.Errorf("grab %s: %v", u, err)
			return
		default:
			g.mu.Lock()
			g.got[u] = append(g.got[u], gr)
			g.mu.Unlock()
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// click has every user grab clicks times, and returns at once; wait
// waits until every grab fed so far has its answer.
func (g *grabbers) click(users []string, clicks int) {
	g.pending.Add(len(users) * clicks)
	go func() {
		for range clicks {
			for _, u := range users {
				g.feed <- u
			}
		}
	}()
}

func (g *grabbers) wait() { g.pending.Wait() }

func (g *grabbers) stop() map[string][]hongbao.Grant {
	g.pending.Wait()
	close(g.feed)
	g.wg.Wait()
	return g.got
}

// migration moves the slot of a shard to another master while users grab:
// first half migrated (its keys split between the two masters: Redis
// answers TRYAGAIN, the scripts are sent again, and a grab still refused
// after the resends is ErrBusy, never a wrong answer), then with every key
// on the target (ASK), then handed over (MOVED). No grant is lost or
// doubled, no user holds two packets, and the audit, the settlement and
// the reconcile are clean.
func (oc *onCluster) migration(t *testing.T) {
	ctx := context.Background()
	const packets, users, shards = 3000, 2400, 3
	c, err := oc.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 300_000, Count: packets, Shards: shards})
	require.NoError(t, err)
	shard := redisstore.Default.Layout(c.ID, shards)[1]
	slot := testenv.KeySlot(shard.Meta)
	from, err := oc.c.MasterOfSlot(ctx, slot)
	require.NoError(t, err)
	to := oc.c.Nodes[0].Addr
	if to == from {
		to = oc.c.Nodes[2].Addr
	}
	names := make([]string, users)
	for i := range names {
		names[i] = "g" + strconv.Itoa(i)
	}
	before, err := oc.c.Redirects(ctx)
	require.NoError(t, err)
	g := startGrabbers(t, oc.eng, c.ID, 32)
	g.click(names[:600], 2)
	g.wait()

	m, err := oc.c.BeginMigration(ctx, slot, to)
	require.NoError(t, err)
	moved, err := m.Step(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	g.click(names[600:1200], 2)
	waitCond(t, "grabs on the split slot refused (TRYAGAIN) until they answer busy", func() bool {
		r, err := oc.c.Redirects(ctx)
		require.NoError(t, err)
		return r.TryAgain > before.TryAgain && g.busy.Load() > 0
	})
	for {
		n, err := m.Step(ctx, 100)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	g.wait() // served by the target, on ASK
	asked, err := oc.c.Redirects(ctx)
	require.NoError(t, err)
	require.Greater(t, asked.Ask, before.Ask, "the source sent the grabs to the target")
	require.NoError(t, m.Finish(ctx))
	g.click(names[1200:], 2)
	g.click(names[:1200], 1) // later grabs answer the same packet
	got := g.stop()
	after, err := oc.c.Redirects(ctx)
	require.NoError(t, err)
	// The client learns the new owner from a MOVED, or from a refresh of
	// the slot map rueidis made on its own after the ASKs (timing decides
	// which); either way the grabs after the handover must be served by
	// the new owner, which the checks below require of every user.
	owner2, err := oc.c.MasterOfSlot(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, to, owner2, "the slot was handed over")
	t.Logf("redirects %+v -> %+v; %d busy answers, %d unknown, retried", before, after, g.busy.Load(), g.unknown.Load())

	owner := checkOnePacketEach(t, got)
	require.Len(t, owner, users, "every user got a packet")
	for _, u := range names[:1200] {
		require.Len(t, got[u], 3)
	}
	oc.settleClean(t, c.ID, users)
}

// settleClean closes campaign id, audits it, settles it into SQLite and
// requires a clean reconcile with granted grants.
func (oc *onCluster) settleClean(t *testing.T, id string, granted int64) {
	ctx := context.Background()
	_, err := oc.eng.CloseCampaign(ctx, id)
	require.NoError(t, err)
	a, err := oc.eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.Equal(t, granted, a.ClaimsCount)
	l := sqliteLedger(t)
	w, err := settle.New(settle.Config{Redis: oc.c.Client, Ledger: l, Consumer: "clean", Only: []string{id}, Logger: quiet()})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err := w.Reconcile(ctx, id)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.Equal(t, "settled", rep.State)
	require.Equal(t, granted, rep.GrantedLedger)
	require.Zero(t, rep.EscrowCents)
}
