package rebuild_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/rebuild"
)

// replicaOf makes replica follow primary and waits until a write on the
// primary is acknowledged by it.
func replicaOf(t *testing.T, replica, primary *testenv.Redis) {
	t.Helper()
	host, port, _ := strings.Cut(primary.Addr, ":")
	c := replica.Client
	require.NoError(t, c.Do(ctx, c.B().Arbitrary("REPLICAOF").Args(host, port).Build()).Error())
	p := primary.Client
	require.Eventually(t, func() bool {
		res := p.DoMulti(ctx, p.B().Incr().Key("replica-check").Build(), p.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := res[1].AsInt64()
		return err == nil && n == 1
	}, 30*time.Second, 5*time.Millisecond)
}

// TestRebuildStaleReplica: a failover without WAIT to a replica that
// stopped copying at some moment (T0). After T0 the old primary granted
// to a few users (A1), then to others (A2); A2's grants reached the
// ledger, A1's did not (pending at a worker that died). The promoted
// replica looks whole, but the ledger holds grants it lacks, so the
// rebuild runs unforced: A2's claims come back from the ledger, and A1's
// packets, which left the pool before A2's (a pool is taken from its
// tail), are kept out of the pool as unrecoverable, never handed out
// again. Grants after the last settled one (B) left no trace anywhere,
// but their block of the pool was opened (the ledger records it): they
// are quarantined with the rest of that block, never handed out again.
func TestRebuildStaleReplica(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		t.Run(lk.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, lk.dsn(t))
			replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
			replicaOf(t, replica, e.r)
			c := e.create(100, 1)
			early := grabAll(t, e.eng, c.ID, "u", 30)
			e.settleAll(e.r.Client, c.ID)
			replicaOf(t, replica, e.r) // everything so far is on the replica
			require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Arbitrary("REPLICAOF").Args("NO", "ONE").Build()).Error())

			a1 := grabAll(t, e.eng, c.ID, "x", 5)
			a2 := grabAll(t, e.eng, c.ID, "y", 5)
			b := grabAll(t, e.eng, c.ID, "b", 5)
			var settled []ledger.Grant
			for u, g := range a2 {
				settled = append(settled, ledger.Grant{Campaign: c.ID, User: u, Seq: g.Seq, Cents: g.Cents})
			}
			_, err := e.l.ApplyGrants(ctx, c.ID, settled)
			require.NoError(t, err)

			quiet(t, e.eng)
			// The replica is the primary now.
			eng := e.engineOn(replica.Client)
			rep, err := e.rebuild(replica.Client, c.ID, false)
			require.NoError(t, err)
			require.Contains(t, strings.Join(rep.Problems, "\n"), "the ledger gives")
			require.EqualValues(t, 35, rep.RestoredClaims)
			require.EqualValues(t, 5, rep.Unrecoverable)
			q, qc := openedUnplaced(t, e, c.ID, merge(early, a1, a2))
			require.EqualValues(t, 10, q, "B's 5 and the 5 packets of their block nobody popped")
			require.Equal(t, q, rep.Quarantined)
			require.Equal(t, qc, rep.QuarantinedCents)
			require.EqualValues(t, 50, rep.RestoredPool, "the blocks never opened")
			require.Equal(t, 1, rep.ShardsSurvived)
			lost := map[int64]bool{}
			for _, s := range rep.UnrecoverablePackets {
				lost[s] = true
			}
			for u, g := range a1 {
				require.True(t, lost[g.Seq], "%s's packet %d is kept out of the pool", u, g.Seq)
			}
			a := requireAudit(t, eng, c.ID)
			require.EqualValues(t, 5+q, a.LostCount, "lost and quarantined, both held out")
			rc := e.reconcile(replica.Client, c.ID)
			require.True(t, rc.OK, "%v", rc.Differences)

			for u, g := range merge(early, a2) {
				again, err := eng.Grab(ctx, c.ID, u)
				require.NoError(t, err)
				require.Equal(t, hongbao.Already, again.Outcome, u)
				require.Equal(t, g.Seq, again.Seq, u)
			}
			after := grabAll(t, eng, c.ID, "n", 70)
			for _, g := range b {
				lost[g.Seq] = true // acknowledged to B's users
			}
			for u, g := range after {
				require.False(t, lost[g.Seq] && g.Outcome == hongbao.Granted, "%s got held packet %d", u, g.Seq)
			}
			requireAudit(t, eng, c.ID)
			e.requireSettledOK(replica.Client, eng, c.ID)
			tot, err := e.l.Totals(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, c.Total, tot.GrantCents+tot.Refunded, "the lost packets are refunded")
			terms, err := e.l.Terms(ctx, c.ID)
			require.NoError(t, err)
			require.ElementsMatch(t, rep.UnrecoverablePackets, terms.Lost, "the ledger knows the lost packets")
		})
	}
}

func merge(ms ...map[string]hongbao.Grant) map[string]hongbao.Grant {
	out := map[string]hongbao.Grant{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestRebuildRefuses: a healthy campaign is refused unless forced (and a
// forced rebuild changes nothing a user sees); a settled one, one whose
// packets were never recorded and one a create is loading are refused.
func TestRebuildRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(50, 2)
	before := grabAll(t, e.eng, c.ID, "u", 20)
	rep, err := e.rebuild(e.r.Client, c.ID, false)
	require.ErrorIs(t, err, rebuild.ErrHealthy)
	require.Empty(t, rep.Problems)

	rep, err = e.rebuild(e.r.Client, c.ID, true)
	require.NoError(t, err)
	require.EqualValues(t, 20, rep.RestoredClaims)
	require.EqualValues(t, 20, rep.ToSettle, "nothing was settled yet: the grants go to the new streams")
	require.Zero(t, rep.Unrecoverable)
	require.Equal(t, 2, rep.ShardsSurvived)
	for u, g := range before {
		again, err := e.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, g.Seq, again.Seq)
	}
	requireAudit(t, e.eng, c.ID)
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
	_, err = e.rebuild(e.r.Client, c.ID, true)
	require.ErrorIs(t, err, rebuild.ErrSettled)

	// Created without recording its packets.
	plain, err := hongbao.New(hongbao.Config{Redis: e.r.Client})
	require.NoError(t, err)
	old, err := plain.Create(ctx, hongbao.Spec{Total: 1000, Count: 10})
	require.NoError(t, err)
	_, err = e.rebuild(e.r.Client, old.ID, true)
	require.ErrorIs(t, err, ledger.ErrNoPackets)

	// A create that is loading it.
	id := testenv.UniqueID(t)
	require.NoError(t, e.l.WritePackets(ctx, id, []int64{5, 5}))
	b, err := redisstore.New(e.r.Client).Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 10, Count: 2}})
	require.NoError(t, err)
	require.NotZero(t, b.Epoch, "loading")
	_, err = e.rebuild(e.r.Client, id, true)
	require.ErrorIs(t, err, rebuild.ErrCreating)
}

// TestRebuildInterrupted: a rebuild that dies after swapping some shards
// leaves the campaign frozen (not found, and no create can take the id
// over); run again, it finishes with the same result.
func TestRebuildInterrupted(t *testing.T) {
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(90, 3)
	before := grabAll(t, e.eng, c.ID, "u", 40)
	e.settleAll(e.r.Client, c.ID)
	// Not settled: only in the streams. Those of users homed on the root
	// are lost with it, and nothing tells of them.
	more := grabAll(t, e.eng, c.ID, "w", 10)
	for u := range more {
		if hongbao.HomeShard(u, 3) == 0 {
			delete(more, u)
		}
	}
	quiet(t, e.eng)
	flushKeysOf(t, e, c.ID, 0) // the root shard is lost

	crash := errors.New("crash")
	rebuild.SetSwapHook(func(k int) error {
		if k == 1 {
			return crash
		}
		return nil
	})
	_, err := e.rebuild(e.r.Client, c.ID, false)
	rebuild.SetSwapHook(nil)
	require.ErrorIs(t, err, crash)
	_, err = e.eng.Grab(ctx, c.ID, "u0")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "frozen")
	_, err = e.eng.Create(ctx, hongbao.Spec{ID: c.ID, Total: c.Total, Count: c.Count, Shards: 3})
	require.ErrorIs(t, err, hongbao.ErrCampaignExists, "a create cannot take a campaign a rebuild holds")

	rep, err := e.rebuild(e.r.Client, c.ID, false)
	require.NoError(t, err)
	require.EqualValues(t, 40+len(more), rep.RestoredClaims)
	// The grants lost with the root were in opened blocks: quarantined
	// with the rest of those blocks nobody is known to hold.
	q, qc := openedUnplaced(t, e, c.ID, merge(before, more))
	require.Equal(t, q, rep.Quarantined)
	require.Equal(t, qc, rep.QuarantinedCents)
	require.LessOrEqual(t, q, int64(3*testBlock+10), "about one block per shard")
	require.EqualValues(t, 50-len(more)-int(q), rep.RestoredPool)
	require.EqualValues(t, len(more), rep.ToSettle)
	require.Zero(t, rep.Unrecoverable)
	for u, g := range merge(before, more) {
		again, err := e.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Already, again.Outcome, u)
		require.Equal(t, g.Seq, again.Seq, u)
	}
	requireNewUsersGetThePool(t, e.eng, c.ID, merge(before, more), 50-len(more)-int(q))
	requireAudit(t, e.eng, c.ID)
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
}

// flushKeysOf deletes every key of shard k of campaign id.
func flushKeysOf(t *testing.T, e *env, id string, k int) {
	t.Helper()
	st, err := e.eng.Status(ctx, id)
	require.NoError(t, err)
	keys := redisstore.Default.ShardKeys(id, st.Shards, k)
	c := e.r.Client
	require.NoError(t, c.Do(ctx, c.B().Del().Key(keys.Meta, keys.Pool, keys.Claims, keys.Grants, keys.Dead, keys.Xfers, keys.Applied).Build()).Error())
}

// TestRebuildClaimsDeleted: the claims hash alone is deleted before
// anything settled; the grants streams still name every holder, so every
// claim comes back and goes on to settle.
func TestRebuildClaimsDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(60, 1)
	before := grabAll(t, e.eng, c.ID, "u", 25)
	k := redisstore.Default.CampaignKeys(c.ID)
	require.NoError(t, e.r.Client.Do(ctx, e.r.Client.B().Del().Key(k.Claims).Build()).Error())
	rep, err := e.rebuild(e.r.Client, c.ID, false)
	require.NoError(t, err)
	require.EqualValues(t, 25, rep.RestoredClaims)
	require.EqualValues(t, 25, rep.ToSettle)
	require.Zero(t, rep.Unrecoverable)
	for u, g := range before {
		h, err := e.eng.Held(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, g.Seq, h.Seq)
	}
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
}

// TestRebuildKeepsAnOperatorsClose: Close records an operator's close in
// the ledger's terms, so a campaign Redis lost entirely comes back
// closed, not open again.
func TestRebuildKeepsAnOperatorsClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(40, 1)
	grabAll(t, e.eng, c.ID, "u", 10)
	_, err := e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	terms, err := e.l.Terms(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.CloseOperator, terms.CloseReason)
	e.settleAll(e.r.Client, c.ID) // settles the grants, and refunds: closed and drained
	_, err = e.rebuild(e.r.Client, c.ID, true)
	require.ErrorIs(t, err, rebuild.ErrSettled)

	d := e.create(40, 1)
	grabAll(t, e.eng, d.ID, "u", 10)
	e.settleAll(e.r.Client, d.ID)
	_, err = e.eng.CloseCampaign(ctx, d.ID)
	require.NoError(t, err)
	quiet(t, e.eng)
	flushAll(t, e.r.Client)
	rep, err := e.rebuild(e.r.Client, d.ID, false)
	require.NoError(t, err)
	require.Equal(t, "closed", rep.State)
	require.EqualValues(t, 10, rep.RestoredClaims)
	st, err := e.eng.Status(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.CloseOperator, st.CloseReason)
	g, err := e.eng.Grab(ctx, d.ID, "late")
	require.NoError(t, err)
	require.Equal(t, hongbao.Closed, g.Outcome)
}

// TestRebuildKeepsTheBlocklist: a shard that lost its meta (and all else
// but the blocked hash) comes back refusing its blocked users; a shard
// whose meta survived keeps its pause.
func TestRebuildKeepsTheBlocklist(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(60, 1)
	grabAll(t, e.eng, c.ID, "u", 10)
	_, err := e.eng.Block(ctx, c.ID, []string{"bad"})
	require.NoError(t, err)
	flushKeysOf(t, e, c.ID, 0)
	_, err = e.rebuild(e.r.Client, c.ID, false)
	require.NoError(t, err)
	g, err := e.eng.Grab(ctx, c.ID, "bad")
	require.NoError(t, err)
	require.Equal(t, hongbao.Blocked, g.Outcome, "blocked after the rebuild")
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.BlockedUsers)

	_, err = e.eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	quiet(t, e.eng)
	_, err = e.rebuild(e.r.Client, c.ID, true) // healthy: forced
	require.NoError(t, err)
	g, err = e.eng.Grab(ctx, c.ID, "late")
	require.NoError(t, err)
	require.Equal(t, hongbao.Paused, g.Outcome, "still paused after the rebuild")
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
}
