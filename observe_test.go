package hongbao_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// hearer is an Observer that keeps what it hears.
type hearer struct {
	hongbao.NopObserver
	mu        sync.Mutex
	grabs     []hongbao.GrabEvent
	discounts []hongbao.DiscountEvent
	batches   []hongbao.BatchEvent
}

func (r *hearer) ObserveGrab(ev hongbao.GrabEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grabs = append(r.grabs, ev)
}

func (r *hearer) ObserveDiscount(ev hongbao.DiscountEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discounts = append(r.discounts, ev)
}

func (r *hearer) ObserveBatch(ev hongbao.BatchEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, ev)
}

// heard returns copies of what r heard.
func (r *hearer) heard() ([]hongbao.GrabEvent, []hongbao.DiscountEvent, []hongbao.BatchEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hongbao.GrabEvent(nil), r.grabs...), append([]hongbao.DiscountEvent(nil), r.discounts...),
		append([]hongbao.BatchEvent(nil), r.batches...)
}

// TestObserversAllHear: an observer of Config.Observers and two added by
// Observe all hear every grab, with its outcome or error, its campaign
// and user even on an error, and a duration; taking one out leaves the
// others hearing (none replaces another), and taking it out twice changes
// nothing. Batches are heard with their sizes, summing to the grabs sent.
func TestObserversAllHear(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	first, second, third := &hearer{}, &hearer{}, &hearer{}
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Observers: []hongbao.Observer{first, nil}})
	require.NoError(t, err)
	removeSecond := eng.Observe(second)
	eng.Observe(third)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 300, Count: 3})

	grab := func(id, user string) {
		t.Helper()
		_, _ = eng.Grab(ctx, id, user)
	}
	grab(c.ID, "u1")
	grab(c.ID, "u1")
	eng.SetSettleBusy([]string{c.ID})
	grab(c.ID, "u2")
	eng.SetSettleBusy(nil)
	grab(testenv.UniqueID(t), "u3")
	removeSecond()
	removeSecond()
	grab(c.ID, "u4")

	type heard struct {
		campaign, user string
		outcome        hongbao.Outcome
		err            error
	}
	want := []heard{
		{c.ID, "u1", hongbao.Granted, nil}, {c.ID, "u1", hongbao.Already, nil},
		{c.ID, "u2", 0, hongbao.ErrBusy}, {"", "u3", 0, hongbao.ErrCampaignNotFound},
		{c.ID, "u4", hongbao.Granted, nil},
	}
	for name, rec := range map[string]*hearer{"first": first, "second": second, "third": third} {
		grabs, _, batches := rec.heard()
		n := len(want)
		if rec == second {
			n-- // taken out before the last grab
		}
		require.Len(t, grabs, n, name)
		for i, ev := range grabs {
			w := want[i]
			if w.campaign != "" {
				require.Equal(t, w.campaign, ev.Grant.Campaign, "%s %d", name, i)
			}
			require.NotEmpty(t, ev.Grant.Campaign, "%s %d", name, i)
			require.Equal(t, w.user, ev.Grant.User, "%s %d", name, i)
			require.Equal(t, w.outcome, ev.Grant.Outcome, "%s %d", name, i)
			if w.err != nil {
				require.ErrorIs(t, ev.Err, w.err, "%s %d", name, i)
			} else {
				require.NoError(t, ev.Err, "%s %d", name, i)
			}
			require.Positive(t, ev.Duration, "%s %d", name, i)
		}
		// Every grab that reached Redis went out in a batch: all but the
		// busy one, which never queued.
		sent := 0
		for _, b := range batches {
			require.Equal(t, "grab", b.Op)
			require.Positive(t, b.Size)
			require.Positive(t, b.Duration)
			sent += b.Size
		}
		require.Equal(t, n-1, sent, name)
	}
}

// TestObserversHearDiscounts: reserve, confirm and cancel are heard with
// their operation, reservation (campaign, user and order set even on an
// error) and error, and their batches with their operation.
func TestObserversHearDiscounts(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	rec := &hearer{}
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Observers: []hongbao.Observer{rec}})
	require.NoError(t, err)
	ctx := context.Background()
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 1_000, Quota: 10, Min: 10, Max: 100})
	ds := eng.Discounts()
	_, err = ds.Reserve(ctx, d.ID, "kim", "o-1", 10_000)
	require.NoError(t, err)
	_, err = ds.Confirm(ctx, d.ID, "kim", "o-1")
	require.NoError(t, err)
	_, err = ds.Cancel(ctx, d.ID, "kim", "o-2")
	require.ErrorIs(t, err, hongbao.ErrNoReservation)

	_, discounts, batches := rec.heard()
	require.Len(t, discounts, 3)
	for i, op := range []hongbao.DiscountOp{hongbao.OpReserve, hongbao.OpConfirm, hongbao.OpCancel} {
		ev := discounts[i]
		require.Equal(t, op, ev.Op)
		require.Equal(t, d.ID, ev.Reservation.Campaign)
		require.Equal(t, "kim", ev.Reservation.User)
		require.Positive(t, ev.Duration)
	}
	require.Equal(t, hongbao.Reserved, discounts[0].Reservation.Outcome)
	require.Equal(t, hongbao.Confirmed, discounts[1].Reservation.State)
	require.Equal(t, "o-2", discounts[2].Reservation.Order)
	require.ErrorIs(t, discounts[2].Err, hongbao.ErrNoReservation)
	var ops []string
	for _, b := range batches {
		ops = append(ops, b.Op)
	}
	require.Equal(t, []string{"reserve", "confirm", "cancel"}, ops)
	require.Equal(t, "confirm", hongbao.OpConfirm.String())
}
