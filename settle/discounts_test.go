package settle_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// pay has users reserve one order each and confirm it, or cancel it
// (every fifth), or abandon it (every seventh), and returns what each
// confirmed user was told, in cents.
func pay(t *testing.T, eng *hongbao.Engine, id string, users int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	got := map[string]int64{}
	var wg sync.WaitGroup
	for u := range users {
		wg.Go(func() {
			user := "u" + strconv.Itoa(u)
			r, err := eng.Discounts().Reserve(ctx, id, user, "o1", 1_000)
			if !assert.NoError(t, err) || r.Outcome != hongbao.Reserved {
				return
			}
			switch {
			case u%7 == 0: // abandoned
			case u%5 == 0:
				_, err = eng.Discounts().Cancel(ctx, id, user, "o1")
				assert.NoError(t, err)
			default:
				c, err := eng.Discounts().Confirm(ctx, id, user, "o1")
				if assert.NoError(t, err) {
					mu.Lock()
					got[user] = c.Cents
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return got
}

// settleDiscount drains the worker until the campaign is settled: once its
// abandoned reservations' holds end, the worker expires them itself.
func settleDiscount(t *testing.T, e *env, w *settle.Worker, id string) *hongbao.DiscountStatus {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := w.Drain(ctx)
		require.NoError(t, err)
		st, err := e.eng.Discounts().Status(ctx, id)
		require.NoError(t, err)
		if st.State == hongbao.StateSettled {
			return st
		}
		require.True(t, time.Now().Before(deadline), "not settled: %+v", st)
		time.Sleep(20 * time.Millisecond) // holds end by the Redis clock
	}
}

// TestSettleDiscounts: confirmed discounts reach the ledger once, escrow
// -> user per order; the leftover is refunded once after the close and
// the last hold; Redis and the ledger reconcile; escrow ends at 0.
func TestSettleDiscounts(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run("shards"+strconv.Itoa(shards), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 50_000, Quota: 500,
				Min: 1, Max: 300, Shards: shards, Hold: time.Second, Funding: "promo"})
			require.NoError(t, err)
			w := e.worker(t, e.l, "w1", d.ID)
			require.NoError(t, w.Start(ctx))
			got := pay(t, e.eng, d.ID, 400)
			_, err = e.eng.Discounts().CloseCampaign(ctx, d.ID)
			require.NoError(t, err)
			w.Stop()
			st := settleDiscount(t, e, w, d.ID)

			var cents int64
			for user, c := range got {
				cents += c
				b, err := e.l.Balance(ctx, ledger.UserAccount(user))
				require.NoError(t, err)
				require.Equal(t, c, b, user)
			}
			lid := ledger.DiscountCampaign(d.ID)
			tot, err := e.l.Totals(ctx, lid)
			require.NoError(t, err)
			require.Equal(t, ledger.Totals{Funded: 50_000, Funding: "promo", GrantCount: int64(len(got)), GrantCents: cents,
				Refunded: 50_000 - cents, RefundDone: true}, tot)
			require.Equal(t, cents, st.ConfirmedCents)
			require.Equal(t, 50_000-cents, st.RefundedCents)
			require.Equal(t, int64(50_000), st.ConfirmedCents+st.RemainingCents, "after settlement the leftover is what remains")
			rep, err := settle.ReconcileDiscount(ctx, e.redis.Client, "", e.l, d.ID)
			require.NoError(t, err)
			require.True(t, rep.OK, "%v", rep.Differences)
			require.Equal(t, "settled", rep.State)
			ids, err := e.eng.Discounts().Campaigns(ctx)
			require.NoError(t, err)
			require.NotContains(t, ids, d.ID, "retired")
			require.EqualValues(t, len(got), w.Stats().Discounts)
		})
	}
}

// TestSettleDiscountsExhausted: a campaign whose every discount is
// confirmed closes by itself (reason exhausted) and settles with nothing
// held; a conflicting row already in the ledger is an incident: the
// discount goes to the dead stream and the campaign waits for an operator.
func TestSettleDiscountsExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1_000, Quota: 10,
		Min: 100, Max: 100, Shards: 2})
	require.NoError(t, err)
	w := e.worker(t, e.l, "w1", d.ID)
	for u := range 10 {
		user := "x" + strconv.Itoa(u)
		_, err := e.eng.Discounts().Reserve(ctx, d.ID, user, "o", 500)
		require.NoError(t, err)
		_, err = e.eng.Discounts().Confirm(ctx, d.ID, user, "o")
		require.NoError(t, err)
	}
	st := settleDiscount(t, e, w, d.ID)
	require.Equal(t, hongbao.CloseExhausted, st.CloseReason)
	require.EqualValues(t, 1_000, st.ConfirmedCents)
	require.Zero(t, st.RefundedCents)
	tot, err := e.l.Totals(ctx, ledger.DiscountCampaign(d.ID))
	require.NoError(t, err)
	require.Zero(t, tot.Escrow)
}

// TestSettleDiscountConflict: the ledger holds the order with another
// amount (a database edited by hand): the confirm is an incident, moved to
// the dead stream, and the campaign is not refunded.
func TestSettleDiscountConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1_000, Quota: 10, Min: 100, Max: 100})
	require.NoError(t, err)
	lid := ledger.DiscountCampaign(d.ID)
	require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: lid, Funding: hongbao.DefaultFunding, Total: 1_000}))
	_, err = e.l.ApplyDiscounts(ctx, lid, []ledger.Discount{{User: "a", Order: "o", Seq: 99, Cents: 5}})
	require.NoError(t, err)
	r, err := e.eng.Discounts().Reserve(ctx, d.ID, "a", "o", 500)
	require.NoError(t, err)
	_, err = e.eng.Discounts().Confirm(ctx, d.ID, "a", "o")
	require.NoError(t, err)
	_, err = e.eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)
	w := e.worker(t, e.l, "w1", d.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, w.Stats().Conflicts)
	st, err := e.eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State, "not refunded while a discount is dead")
	rep, err := settle.ReconcileDiscount(ctx, e.redis.Client, "", e.l, d.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 1, rep.Dead)
	require.Contains(t, rep.Differences[0], "mismatch for a/o", "%v", rep.Differences)
	require.NotEqual(t, int64(99), r.Seq, "the ledger row holds another unit: a conflict")

	// Redriven without a fix, it is the same incident again.
	n, err := w.RedriveDiscount(ctx, d.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Stats().Conflicts)
	_, err = w.Redrive(ctx, d.ID)
	require.ErrorIs(t, err, redisstore.ErrNoCampaign, "Redrive is for red packet campaigns")
}
