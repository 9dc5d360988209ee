package hongbao_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/settle"
)

// TestReserveOrderMismatch: a repeated reserve of an order answers its
// discount only for the order amount it was reserved for. Another amount
// is ErrOrderMismatch, held or confirmed, alone or in the same batch: the
// stored discount may exceed the new amount (before, it was answered as
// already, 80 cents off a 50-cent order). Nothing changes.
func TestReserveOrderMismatch(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 800, Quota: 10, Min: 80, Max: 80})
	r, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 1000)
	require.NoError(t, err)
	require.Equal(t, hongbao.Reserved, r.Outcome)
	require.EqualValues(t, 80, r.Cents)

	_, err = eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 50)
	require.ErrorIs(t, err, hongbao.ErrOrderMismatch, "held, another amount")
	require.Equal(t, "hongbao: reserve "+d.ID+": order reserved for another amount", err.Error())
	again, err := eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 1000)
	require.NoError(t, err, "the same amount answers as before")
	require.Equal(t, hongbao.ReservedAlready, again.Outcome)
	require.Equal(t, r.Seq, again.Seq)

	_, err = eng.Discounts().Confirm(ctx, d.ID, "alice", "o-1")
	require.NoError(t, err)
	_, err = eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 999)
	require.ErrorIs(t, err, hongbao.ErrOrderMismatch, "confirmed, another amount")
	again, err = eng.Discounts().Reserve(ctx, d.ID, "alice", "o-1", 1000)
	require.NoError(t, err)
	require.Equal(t, hongbao.Confirmed, again.State)

	// One batch: the second request of an order sees the first's record.
	type answer struct {
		r   hongbao.Reservation
		err error
	}
	answers := make(chan answer, 2)
	for _, cents := range []int64{500, 40} {
		go func() {
			r, err := eng.Discounts().Reserve(ctx, d.ID, "bob", "o-2", cents)
			answers <- answer{r, err}
		}()
	}
	var reserved, refused int
	for range 2 {
		a := <-answers
		if a.err != nil {
			require.ErrorIs(t, a.err, hongbao.ErrOrderMismatch)
			refused++
			continue
		}
		require.Equal(t, hongbao.Reserved, a.r.Outcome)
		reserved++
	}
	require.Equal(t, 1, reserved)
	require.Equal(t, 1, refused)

	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.ConfirmedCount)
	require.EqualValues(t, 1, st.ReservedCount)
	requireAudit(t, eng, d.ID)
}

// TestClosedExhaustedAnswersExhausted: a discount campaign closed because
// every discount was confirmed answers exhausted, closed and settled, on
// one shard and on several, as a red packet campaign closed sold out
// answers SOLD_OUT; one closed by an operator answers closed.
func TestClosedExhaustedAnswersExhausted(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		t.Run(strconv.Itoa(shards), func(t *testing.T) {
			d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 600, Quota: 6, Min: 100, Max: 100, Shards: shards})
			for u := range 6 {
				user := "u" + strconv.Itoa(u)
				res, err := eng.Discounts().Reserve(ctx, d.ID, user, "o", 500)
				require.NoError(t, err)
				require.Equal(t, hongbao.Reserved, res.Outcome)
				_, err = eng.Discounts().Confirm(ctx, d.ID, user, "o")
				require.NoError(t, err)
			}
			w, err := settle.New(settle.Config{Redis: r.Client, Ledger: sqliteLedger(t), Consumer: "exhausted",
				Only: []string{d.ID}, Logger: quiet()})
			require.NoError(t, err)
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err = w.Pass(dctx) // closes it, exhausted
			require.NoError(t, err)
			st, err := eng.Discounts().Status(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, hongbao.CloseExhausted, st.CloseReason)
			require.NotEqual(t, hongbao.StateOpen, st.State)
			for u := range 2 * shards {
				res, err := eng.Discounts().Reserve(ctx, d.ID, "late"+strconv.Itoa(u), "o", 500)
				require.NoError(t, err)
				require.Equal(t, hongbao.Exhausted, res.Outcome, "state %s, closed %s", st.State, st.CloseReason)
			}
			_, err = w.Drain(dctx)
			require.NoError(t, err)
			st, err = eng.Discounts().Status(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, hongbao.StateSettled, st.State)
			res, err := eng.Discounts().Reserve(ctx, d.ID, "later", "o", 500)
			require.NoError(t, err)
			require.Equal(t, hongbao.Exhausted, res.Outcome, "settled")
		})
	}
	// Closed (not settled yet) with reason exhausted, as the worker closes
	// it, while a reservation is still held.
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 600, Quota: 6, Min: 100, Max: 100, Shards: 2})
	held, err := eng.Discounts().Reserve(ctx, d.ID, "u", "o", 500)
	require.NoError(t, err)
	store := redisstore.New(r.Client)
	for _, k := range redisstore.Default.DiscountLayout(d.ID, 2) {
		_, _, _, err := store.Close(ctx, k.Keys(), hongbao.CloseExhausted)
		require.NoError(t, err)
	}
	st, err := eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	for u := range 4 {
		res, err := eng.Discounts().Reserve(ctx, d.ID, "v"+strconv.Itoa(u), "o", 500)
		require.NoError(t, err)
		require.Equal(t, hongbao.Exhausted, res.Outcome, "closed, exhausted")
	}
	again, err := eng.Discounts().Reserve(ctx, d.ID, "u", "o", 500)
	require.NoError(t, err)
	require.Equal(t, hongbao.ReservedAlready, again.Outcome, "the holder still sees its own")
	require.Equal(t, held.Seq, again.Seq)

	d = createDiscount(t, eng, hongbao.DiscountSpec{Budget: 600, Quota: 6, Min: 100, Max: 100})
	_, err = eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)
	res, err := eng.Discounts().Reserve(ctx, d.ID, "u", "o", 500)
	require.NoError(t, err)
	require.Equal(t, hongbao.ReserveClosed, res.Outcome, "closed by an operator")
}
