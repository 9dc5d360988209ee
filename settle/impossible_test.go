package settle_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// deadEntries reads a shard's dead stream.
func deadEntries(t *testing.T, e *env, k redisstore.Keys) []map[string]string {
	t.Helper()
	rc := e.redis.Client
	xs, err := rc.Do(context.Background(), rc.B().Xrange().Key(k.Dead).Start("-").End("+").Build()).AsXRange()
	require.NoError(t, err)
	out := make([]map[string]string, len(xs))
	for i, x := range xs {
		out[i] = x.FieldValues
	}
	return out
}

// TestGrantAfterRefundIsDead: the ledger holds the campaign's refund
// already (its escrow closed), and Redis still has grants to settle: the
// ledger refuses each as impossible, and the worker moves each to the dead
// stream and counts it. No grant is paid out of an escrow that holds
// nothing; no balance goes below zero.
func TestGrantAfterRefundIsDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
	require.NoError(t, err)
	require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: hongbao.DefaultFunding, Total: 10_000}))
	require.NoError(t, e.l.Refund(ctx, c.ID, 10_000))
	const users = 5
	for u := range users { // one stream entry each
		g, err := e.eng.Grab(ctx, c.ID, "r"+strconv.Itoa(u))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	w := e.worker(t, e.l, "w1", c.ID)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err, "a refused entry is dead-lettered, not retried forever")

	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.Zero(t, tot.GrantCount, "no grant after the refund")
	require.Zero(t, tot.Escrow, "the escrow never goes below zero")
	for u := range users {
		b, err := e.l.Balance(ctx, ledger.UserAccount("r"+strconv.Itoa(u)))
		require.NoError(t, err)
		require.Zero(t, b)
	}
	st := w.Stats()
	require.EqualValues(t, users, st.Refused)
	require.Zero(t, st.Failures, "a refusal is an incident, not an outage")
	dead := deadEntries(t, e, redisstore.Default.CampaignKeys(c.ID))
	require.Len(t, dead, users, "each refused grant is in the dead stream")
	for _, d := range dead {
		require.Contains(t, d["reason"], string(ledger.RefusedAfterRefund))
	}
	g, err := redisstore.New(e.redis.Client).Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Pending+g.Lag, "the refused entries are acknowledged with their move")
}

// overRefunding is a ledger whose refunds ask one cent more than they are
// given: a refund the real ledger below must refuse.
type overRefunding struct{ ledger.Ledger }

func (o overRefunding) Refund(ctx context.Context, c string, cents int64) error {
	return o.Ledger.Refund(ctx, c, cents+1)
}

// TestRefundRefusedIsNoted: a refund the ledger refuses (here one cent
// more than the escrow holds), or that the worker sees it would refuse
// (the ledger holds a grant Redis never counted: the refund's counts
// disagree with it), leaves the campaign unsettled with a note in its dead
// stream and an incident counted, once: the note holds the refund back
// until an operator redrives, and then the refund is tried again.
func TestRefundRefusedIsNoted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		ledger func(e *env, id string) ledger.Ledger
		reason string
	}{
		{"refused by the ledger", func(e *env, _ string) ledger.Ledger { return overRefunding{e.l} }, string(ledger.RefusedOverdraw)},
		{"counts disagree", func(e *env, id string) ledger.Ledger {
			_, err := e.l.ApplyGrants(context.Background(), id, []ledger.Grant{{Seq: 10_000, User: "stranger", Cents: 1}})
			require.NoError(t, err)
			return e.l
		}, "outstanding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
			require.NoError(t, err)
			require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: hongbao.DefaultFunding, Total: 10_000}))
			rain(t, e.eng, c.ID, 10)
			_, err = e.eng.CloseCampaign(ctx, c.ID)
			require.NoError(t, err)
			w := e.worker(t, tc.ledger(e, c.ID), "w1", c.ID)
			dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			for range 2 { // a second drain finds the note and does not refuse again
				_, err = w.Drain(dctx)
				require.NoError(t, err, "a refused refund is noted, not retried forever")
			}

			st, err := e.eng.Status(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, hongbao.StateClosed, st.State, "not refunded")
			tot, err := e.l.Totals(ctx, c.ID)
			require.NoError(t, err)
			require.False(t, tot.RefundDone)
			require.EqualValues(t, 1, w.Stats().Refused)
			require.Zero(t, w.Stats().Failures)
			dead := deadEntries(t, e, redisstore.Default.CampaignKeys(c.ID))
			require.Len(t, dead, 1)
			require.Equal(t, "none", dead[0]["entry"])
			require.Contains(t, dead[0]["reason"], "refund refused")
			require.Contains(t, dead[0]["reason"], tc.reason)
			rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
			require.NoError(t, err)
			require.EqualValues(t, 1, rep.Dead)

			// A redrive deletes the note; the refund is tried again, and
			// refused again while the cause stays.
			n, err := w.Redrive(ctx, c.ID)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			_, err = w.Drain(dctx)
			require.NoError(t, err)
			require.EqualValues(t, 2, w.Stats().Refused)
			require.Len(t, deadEntries(t, e, redisstore.Default.CampaignKeys(c.ID)), 1)
		})
	}
}

// TestDiscountAfterRefundIsDead: the same for a discount campaign whose
// refund the ledger holds already: each confirmed discount is refused,
// dead-lettered and counted; nothing is paid out of the closed escrow.
func TestDiscountAfterRefundIsDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1_000, Quota: 10,
		Min: 100, Max: 100, Funding: "promo"})
	require.NoError(t, err)
	lid := ledger.DiscountCampaign(d.ID)
	require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: lid, Funding: "promo", Total: 1_000}))
	require.NoError(t, e.l.Refund(ctx, lid, 1_000))
	for u := range 2 { // one stream entry each
		user := "x" + strconv.Itoa(u)
		_, err := e.eng.Discounts().Reserve(ctx, d.ID, user, "o", 500)
		require.NoError(t, err)
		_, err = e.eng.Discounts().Confirm(ctx, d.ID, user, "o")
		require.NoError(t, err)
	}
	w := e.worker(t, e.l, "w1", d.ID)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	tot, err := e.l.Totals(ctx, lid)
	require.NoError(t, err)
	require.Zero(t, tot.GrantCount)
	require.Zero(t, tot.Escrow)
	require.EqualValues(t, 2, w.Stats().Refused)
	require.Len(t, deadEntries(t, e, redisstore.Default.DiscountLayout(d.ID, 1)[0].Keys()), 2)
}
