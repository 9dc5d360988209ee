package settle_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// picky is a reachable ledger that refuses as invalid, as a whole, every
// batch holding one particular user's grant: the fault of one well-formed
// entry, which only the ledger can see.
type picky struct {
	ledger.Ledger
	culprit string
	calls   atomic.Int64
}

func (p *picky) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	p.calls.Add(1)
	for _, g := range gs {
		if g.User == p.culprit {
			return ledger.ApplyResult{}, fmt.Errorf("%w: user %q refused", ledger.ErrInvalid, g.User)
		}
	}
	return p.Ledger.ApplyGrants(ctx, c, gs)
}

// flapping is a ledger whose writes fail for a while with errors that are
// nobody's fault (a pooled connection that broke while the database
// restarted), while its ping already succeeds.
type flapping struct {
	ledger.Ledger
	failures atomic.Int64 // writes still to fail
}

func (f *flapping) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	if f.failures.Add(-1) >= 0 {
		return ledger.ApplyResult{}, errors.New("conn closed")
	}
	return f.Ledger.ApplyGrants(ctx, c, gs)
}

// TestFlappingLedgerDeadLettersNothing: writes that fail while the ledger
// answers its ping, for reasons that are not the entries' own, are tried
// again; nothing reaches the dead stream.
func TestFlappingLedgerDeadLettersNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	for u := 0; u < 8; u++ { // one grab at a time: one entry each
		_, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
	}
	f := &flapping{Ledger: e.l}
	f.failures.Store(12) // more than a batch of four needs to be split down to single entries
	w := e.worker(t, f, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	require.Positive(t, w.Stats().Failures, "the failures were met and backed off")
	require.Zero(t, w.Stats().Malformed)
	g, err := redisstore.New(e.redis.Client).Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Dead, "no entry is dead-lettered for a fault that is not its own")
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 8, tot.GrantCount, "every grant settles once the ledger is well")
}

// TestRefusedEntryAlone: a batch that the reachable database refuses
// because of one entry is split and retried, so that entry ends alone in
// the dead stream and the rest of its batch settles.
func TestRefusedEntryAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	// One grab at a time: one stream entry each, so one read of four
	// entries holds the culprit (u2) third, between good entries.
	for u := 0; u < 8; u++ {
		g, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	p := &picky{Ledger: e.l, culprit: "u2"}
	w := e.worker(t, p, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 7, tot.GrantCount, "every grant but the culprit's settles")
	require.Greater(t, p.calls.Load(), int64(3), "the refused batch was split and retried")
	require.EqualValues(t, 1, w.Stats().Malformed)
	require.Zero(t, w.Stats().Failures, "a refusal by a reachable database is not an outage")

	k := redisstore.Default.CampaignKeys(c.ID)
	rc := e.redis.Client
	dead, err := rc.Do(ctx, rc.B().Xrange().Key(k.Dead).Start("-").End("+").Build()).AsXRange()
	require.NoError(t, err)
	require.Len(t, dead, 1, "the culprit alone is dead-lettered")
	require.Equal(t, "u2", dead[0].FieldValues["user"])
	g, err := redisstore.New(rc).Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Pending, "the dead entry was acknowledged with its move")

	rep, err := settle.Reconcile(ctx, rc, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 1, rep.Dead)

	// Once the cause is fixed, a redrive settles it and the campaign can
	// close, refund and reconcile.
	p.culprit = ""
	n, err := w.Redrive(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err = settle.Reconcile(ctx, rc, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, 8, rep.GrantedLedger)
	require.Zero(t, rep.EscrowCents)
}

// TestDeletedPendingIsAnAlarm: an entry deleted from the stream while
// pending, at a dead consumer or at this one, is counted as an alarm and
// stops being pending; the other entries settle.
func TestDeletedPendingIsAnAlarm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	for u := 0; u < 6; u++ { // one grab at a time: one entry each
		_, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
	}
	store := redisstore.New(e.redis.Client)
	rc := e.redis.Client
	k := redisstore.Default.CampaignKeys(c.ID)
	// A consumer that died took two entries; this worker took two more
	// before a restart. One of each is then deleted from the stream.
	gone, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "gone", 2, false)
	require.NoError(t, err)
	require.Len(t, gone, 2)
	mine, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "w1", 2, false)
	require.NoError(t, err)
	require.Len(t, mine, 2)
	require.NoError(t, rc.Do(ctx, rc.B().Xdel().Key(k.Grants).Id(gone[0].ID, mine[0].ID).Build()).Error())

	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Stats().Deleted, "both deleted pending entries raise the alarm")
	g, err := store.Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Pending)
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, tot.GrantCount, "the entries still in the stream settle")
	// The two lost grants still stand in the claims: reconcile shows them.
	rep, err := settle.Reconcile(ctx, rc, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 6, rep.GrantedRedis)
	require.EqualValues(t, 4, rep.GrantedLedger)
}

// TestUnreconciledKeepsKeys: a campaign that settles but does not
// reconcile leaves the registry with its Redis keys kept, without expiry,
// for an operator; one that reconciles expires after the retention.
func TestUnreconciledKeepsKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rc := e.redis.Client
	store := redisstore.New(rc)
	pttl := func(id string) int64 {
		t.Helper()
		ms, err := rc.Do(ctx, rc.B().Pttl().Key(redisstore.Default.CampaignKeys(id).Meta).Build()).AsInt64()
		require.NoError(t, err)
		return ms
	}
	var ids []string
	for i := 0; i < 2; i++ {
		c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t) + strconv.Itoa(i), Total: 300, Count: 3, Split: "fixed"})
		require.NoError(t, err)
		ids = append(ids, c.ID)
		for _, u := range []string{"alice", "bob"} {
			_, err := e.eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
		}
	}
	w := e.worker(t, e.l, "w1", ids...)
	_, err := w.Drain(ctx)
	require.NoError(t, err)
	// In the second campaign, Redis now says alice holds bob's packet:
	// the counters still agree with the ledger, the contents do not.
	bad := ids[1]
	k := redisstore.Default.CampaignKeys(bad)
	bobs, err := rc.Do(ctx, rc.B().Hget().Key(k.Claims).Field("bob").Build()).ToString()
	require.NoError(t, err)
	require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(k.Claims).FieldValue().FieldValue("alice", bobs).Build()).Error())

	for _, id := range ids {
		_, err := e.eng.CloseCampaign(ctx, id)
		require.NoError(t, err)
	}
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	registered, err := store.Campaigns(ctx, redisstore.RedPacket)
	require.NoError(t, err)
	for _, id := range ids {
		st, err := e.eng.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, hongbao.StateSettled, st.State)
		require.NotContains(t, registered, id)
	}
	require.Positive(t, pttl(ids[0]), "a campaign that reconciles expires after the retention")
	require.EqualValues(t, -1, pttl(bad), "a campaign that does not reconcile keeps its keys")
	rep, err := settle.Reconcile(ctx, rc, "", e.l, bad)
	require.NoError(t, err)
	require.False(t, rep.OK)
}
