package hongbao_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/rebuild"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

// deployment is one copy of a host's service on a Redis it shares with
// others, as a team embedding the library runs it: an engine that records
// every packet in its own ledger, and a scheduler that settles into that
// ledger, in namespace ns, electing its leader under lease.
type deployment struct {
	name, ns string
	rc       rueidis.Client
	eng      *hongbao.Engine
	l        ledger.Ledger
	sched    *scheduler.Scheduler
}

func startDeployment(t *testing.T, rc rueidis.Client, name, ns, lease string) *deployment {
	t.Helper()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), name+".db"))
	require.NoError(t, err)
	eng, err := hongbao.New(hongbao.Config{Redis: rc, Namespace: ns, Packets: l, BlockSize: 100})
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Config{
		Settle: settle.Config{Redis: rc, Namespace: ns, Ledger: l, Consumer: name, Logger: quiet(),
			Poll: 5 * time.Millisecond, IdlePoll: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		Engine: eng, LeaseName: lease, LeaseTTL: time.Second, ReapEvery: 50 * time.Millisecond, Logger: quiet(),
	})
	require.NoError(t, err)
	require.NoError(t, sched.Start(ctx))
	t.Cleanup(func() {
		sched.Stop()
		_ = l.Close()
	})
	return &deployment{name: name, ns: ns, rc: rc, eng: eng, l: l, sched: sched}
}

// rain grabs campaign id of d once for each of users prefix0..prefixN-1,
// concurrently, and returns what each user who got a packet was told.
func (d *deployment) rain(t *testing.T, id, prefix string, users int) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int64{}
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := prefix + strconv.Itoa(u)
			g, err := d.eng.Grab(context.Background(), id, user)
			if !assert.NoError(t, err) {
				return
			}
			if g.Outcome == hongbao.Granted {
				mu.Lock()
				got[user] = g.Cents
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return got
}

// settled closes campaign id of d and waits until its own scheduler has
// settled it: refunded, state settled.
func (d *deployment) settled(t *testing.T, id string) *hongbao.Status {
	t.Helper()
	ctx := context.Background()
	_, err := d.eng.CloseCampaign(ctx, id)
	require.NoError(t, err)
	var st *hongbao.Status
	require.Eventually(t, func() bool {
		st, err = d.eng.Status(ctx, id)
		return err == nil && st.State == hongbao.StateSettled
	}, 30*time.Second, 20*time.Millisecond, "%s: campaign %s never settled", d.name, id)
	return st
}

// paid checks that d's ledger holds exactly the grants of granted for
// campaign id, the campaign's fund and its refund, and that a reconcile of
// Redis against it finds nothing wrong.
func (d *deployment) paid(t *testing.T, id string, granted map[string]int64) {
	t.Helper()
	ctx := context.Background()
	var cents int64
	for _, c := range granted {
		cents += c
	}
	tot, err := d.l.Totals(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, len(granted), tot.GrantCount, "%s: grants of %s in its ledger", d.name, id)
	require.Equal(t, cents, tot.GrantCents, "%s: cents granted of %s in its ledger", d.name, id)
	require.True(t, tot.RefundDone, "%s: %s refunded", d.name, id)
	require.Zero(t, tot.Escrow, "%s: escrow of %s", d.name, id)
	for user, c := range granted {
		b, err := d.l.Balance(ctx, ledger.UserAccount(user))
		require.NoError(t, err)
		require.Equal(t, c, b, "%s: %s paid once, what it was told", d.name, user)
	}
	rep, err := settle.Reconcile(ctx, d.rc, d.ns, d.l, id)
	require.NoError(t, err)
	require.True(t, rep.OK, "%s: reconcile %s: %v", d.name, id, rep.Differences)
}

// untouched checks that d's ledger holds no money of campaign id: no
// fund, grant or refund (its packets may be recorded there, by the engine
// that created it).
func (d *deployment) untouched(t *testing.T, id string) {
	t.Helper()
	tot, err := d.l.Totals(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, tot.Funded, "%s funded campaign %s, not its own", d.name, id)
	require.Zero(t, tot.GrantCount+tot.GrantCents, "%s paid grants of campaign %s, not its own", d.name, id)
	require.Zero(t, tot.Refunded, "%s refunded campaign %s, not its own", d.name, id)
	require.False(t, tot.RefundDone, "%s refunded campaign %s, not its own", d.name, id)
}

// TestTwoNamespacesOnOneRedis: two deployments share one Redis in two
// namespaces, each with the same lease name and a campaign of the same
// id. Each elects its own scheduler, rains, pauses, loses its campaign's
// keys and rebuilds it, and settles into its own ledger exactly what its
// own users were told, while the other's campaign of the same id goes on
// untouched.
func TestTwoNamespacesOnOneRedis(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	base := testenv.UniqueID(t)
	a := startDeployment(t, r.Client, "a", "a-"+base, "scheduler")
	b := startDeployment(t, r.Client, "b", "b-"+base, "scheduler")
	ctx := context.Background()
	const id = "rain"
	for _, d := range []*deployment{a, b} {
		_, err := d.eng.Create(ctx, hongbao.Spec{ID: id, Total: 100_000, Count: 1000})
		require.NoError(t, err, d.name)
	}
	require.Eventually(t, func() bool { return a.sched.IsLeader() && b.sched.IsLeader() }, 10*time.Second, 10*time.Millisecond,
		"each namespace elects its own scheduler under the same lease name")

	// A pause in one namespace is not a pause in the other.
	_, err := a.eng.Pause(ctx, id)
	require.NoError(t, err)
	g, err := a.eng.Grab(ctx, id, "p0")
	require.NoError(t, err)
	require.Equal(t, hongbao.Paused, g.Outcome)
	g, err = b.eng.Grab(ctx, id, "p0")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	_, err = a.eng.Resume(ctx, id)
	require.NoError(t, err)
	grantedB := map[string]int64{"p0": g.Cents}

	grantedA := a.rain(t, id, "u", 300)
	for u, c := range b.rain(t, id, "u", 200) {
		grantedB[u] = c
	}

	// b loses its campaign's keys once what it granted is settled, and
	// rebuilds it from its ledger, in its namespace only.
	require.Eventually(t, func() bool {
		tot, err := b.l.Totals(ctx, id)
		return err == nil && tot.GrantCount == int64(len(grantedB))
	}, 20*time.Second, 10*time.Millisecond, "b settles its grants")
	before, err := a.eng.Status(ctx, id)
	require.NoError(t, err)
	dropCampaign(t, r.Client, b.ns, id)
	_, err = b.eng.Status(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	rep, err := rebuild.Rebuild(ctx, rebuild.Config{Redis: r.Client, Namespace: b.ns, Ledger: b.l}, id)
	require.NoError(t, err)
	require.EqualValues(t, len(grantedB), rep.RestoredClaims)
	after, err := a.eng.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, before.GrantedCount, after.GrantedCount, "a's campaign of the same id untouched by b's loss and rebuild")
	g, err = b.eng.Grab(ctx, id, "p0")
	require.NoError(t, err)
	require.Equal(t, hongbao.Already, g.Outcome, "b's user keeps the packet it was told of")
	require.Equal(t, grantedB["p0"], g.Cents)
	for u, c := range b.rain(t, id, "v", 100) {
		grantedB[u] = c
	}

	stA, stB := a.settled(t, id), b.settled(t, id)
	require.EqualValues(t, len(grantedA), stA.GrantedCount)
	require.EqualValues(t, len(grantedB), stB.GrantedCount)
	a.paid(t, id, grantedA)
	b.paid(t, id, grantedB)
	for _, d := range []*deployment{a, b} {
		require.Zero(t, d.sched.Worker().Stats().Foreign, "%s met no foreign campaign: the namespaces do not overlap", d.name)
	}
}

// dropCampaign deletes every key of red packet campaign id of namespace
// ns and its registry entry, as a FLUSHALL or a lost shard would.
func dropCampaign(t *testing.T, rc rueidis.Client, ns, id string) {
	t.Helper()
	n, err := redisstore.ParseNamespace(ns)
	require.NoError(t, err)
	ctx := context.Background()
	v, err := redisstore.New(rc).WithNamespace(n).Read(ctx, id)
	require.NoError(t, err)
	for _, k := range v.Shards {
		for _, key := range []string{k.Meta, k.Pool, k.Claims, k.Grants, k.Dead, k.Staging, k.Xfers, k.Applied, k.Lost, k.Sync, k.Blocked} {
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
		}
	}
	require.NoError(t, rc.Do(ctx, rc.B().Zrem().Key(n.Index(redisstore.RedPacket)).Member(id).Build()).Error())
}

// TestOneNamespaceTwoLedgers: two deployments misconfigured into one
// namespace, each with its own ledger and its own lease name (so both
// schedulers run, reading the same registry and the same consumer
// groups). Each settles only its own campaigns, into its own ledger: the
// other's are counted as foreign and never paid, funded or refunded here.
// Before campaigns recorded their owner, both schedulers settled both
// campaigns and users were paid twice.
func TestOneNamespaceTwoLedgers(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ns := testenv.UniqueID(t)
	a := startDeployment(t, r.Client, "a", ns, "scheduler-a")
	b := startDeployment(t, r.Client, "b", ns, "scheduler-b")
	ctx := context.Background()
	ids := map[*deployment]string{a: "a-rain", b: "b-rain"}
	granted := map[*deployment]map[string]int64{}
	for _, d := range []*deployment{a, b} {
		c, err := d.eng.Create(ctx, hongbao.Spec{ID: ids[d], Total: 50_000, Count: 500, Shards: 2})
		require.NoError(t, err)
		owner, err := d.l.Identity(ctx)
		require.NoError(t, err)
		require.Equal(t, owner, c.Owner, "%s's campaign records its ledger as its owner", d.name)
		granted[d] = d.rain(t, ids[d], "u", 400)
	}
	require.Eventually(t, func() bool { return a.sched.IsLeader() && b.sched.IsLeader() }, 10*time.Second, 10*time.Millisecond)
	for _, d := range []*deployment{a, b} {
		d.settled(t, ids[d])
		d.paid(t, ids[d], granted[d])
	}
	a.untouched(t, ids[b])
	b.untouched(t, ids[a])
	for _, d := range []*deployment{a, b} {
		require.Positive(t, d.sched.Worker().Stats().Foreign, "%s counts the other's campaign as foreign", d.name)
	}
}

// TestOwnerChange: an operator moves a campaign to another owner with a
// reason; the old owner's scheduler stops touching it, and the change is
// refused when the campaign records another owner than the operator
// expected.
func TestOwnerChange(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ns := testenv.UniqueID(t)
	a := startDeployment(t, r.Client, "a", ns, "scheduler-a")
	ctx := context.Background()
	c, err := a.eng.Create(ctx, hongbao.Spec{ID: "moved", Total: 10_000, Count: 100})
	require.NoError(t, err)
	_, err = a.eng.SetOwner(ctx, c.ID, hongbao.OwnerChange{From: "ledger-somebody-else", To: "wallet:b", Reason: "test"})
	var oe *hongbao.OwnerError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, c.Owner, oe.Owner)
	_, err = a.eng.SetOwner(ctx, c.ID, hongbao.OwnerChange{From: c.Owner, To: "wallet:b"})
	require.ErrorContains(t, err, "reason")
	st, err := a.eng.SetOwner(ctx, c.ID, hongbao.OwnerChange{From: c.Owner, To: "wallet:b", Reason: "settles into b's wallet"})
	require.NoError(t, err)
	require.Equal(t, "wallet:b", st.Owner)
	terms, err := a.l.Terms(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, "wallet:b", terms.Owner, "the recorded terms follow, so a rebuild restores the new owner")
	granted := a.rain(t, c.ID, "u", 50)
	require.Len(t, granted, 50)
	_, err = a.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.sched.Worker().Stats().Foreign > 0 }, 10*time.Second, 10*time.Millisecond)
	st, err = a.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State, "the old owner neither settles nor refunds it")
	a.untouched(t, c.ID)
}

// twoNamespaces: two deployments on one Redis Cluster in two namespaces,
// each with a campaign of the same id over three shards (so over three
// masters, in the same slots in both namespaces), rain and settle, each
// into its own ledger, exactly what its own users were told.
func (oc *onCluster) twoNamespaces(t *testing.T) {
	base := testenv.UniqueID(t)
	a := startDeployment(t, oc.c.Client, "a", "a-"+base, "scheduler")
	b := startDeployment(t, oc.c.Client, "b", "b-"+base, "scheduler")
	ctx := context.Background()
	id := "rain-" + base
	granted := map[*deployment]map[string]int64{}
	for _, d := range []*deployment{a, b} {
		_, err := d.eng.Create(ctx, hongbao.Spec{ID: id, Total: 60_000, Count: 600, Shards: 3})
		require.NoError(t, err, d.name)
	}
	granted[a] = a.rain(t, id, "u", 500)
	granted[b] = b.rain(t, id, "u", 300)
	for _, d := range []*deployment{a, b} {
		st := d.settled(t, id)
		require.EqualValues(t, len(granted[d]), st.GrantedCount)
		d.paid(t, id, granted[d])
		require.Zero(t, d.sched.Worker().Stats().Foreign, d.name)
	}
}
