package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
)

// rushCounts are what the simulated clients were told, in all.
type rushCounts struct {
	orders, reserved, exhausted, limit, cancelled, abandoned, late atomic.Int64
	confirmedCount, confirmedCents                                 atomic.Int64
}

// rush lets the users pay, concurrency at a time: each user's orders one
// after another, each reserved, then confirmed, cancelled or abandoned.
func (d *discountDemoCmd) rush(ctx context.Context) (*discountDemoReport, *rushCounts, error) {
	f := &d.f
	c := &rushCounts{}
	bar := startProgress(d.env, !f.json, "paying", int64(f.users)*int64(f.orders))
	defer bar.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errOnce sync.Once
	var firstErr error
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	start := time.Now()
	forUsers(ctx, f.users, f.concurrency, func(w int, users <-chan int) {
		rnd := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(w)))
		for u := range users {
			if err := d.payUser(ctx, bench.UserName(u), rnd, c, bar); err != nil {
				fail(err)
			}
		}
	})
	if firstErr != nil {
		return nil, nil, firstErr
	}
	secs := time.Since(start).Seconds()
	rep := &discountDemoReport{
		Campaign: d.d.ID, Redis: d.conn.Kind, Shards: d.d.Shards, BudgetCents: d.d.Budget, Quota: d.d.Quota, Users: f.users,
		Orders: c.orders.Load(), Reserved: c.reserved.Load(), Exhausted: c.exhausted.Load(), Limit: c.limit.Load(),
		Cancelled: c.cancelled.Load(), Abandoned: c.abandoned.Load(), LateConfirms: c.late.Load(),
		Seconds: round3(secs), Transfers: d.eng.Discounts().Stats().Transfers,
	}
	if secs > 0 {
		rep.OrdersPerSec = round1(float64(rep.Orders) / secs)
	}
	return rep, c, nil
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// payUser pays user's orders and counts what the user was told.
func (d *discountDemoCmd) payUser(ctx context.Context, user string, rnd *rand.Rand, c *rushCounts, bar *progress) error {
	f := &d.f
	id := d.d.ID
	for o := range f.orders {
		order := fmt.Sprintf("o%d", o+1)
		amount := f.maxC/2 + rnd.Int64N(4*f.maxC) + 1 // sometimes below the discount: clipped
		r, err := retryDiscount(ctx, func() (hongbao.Reservation, error) {
			return d.eng.Discounts().Reserve(ctx, id, user, order, amount)
		})
		if err != nil {
			return err
		}
		c.orders.Add(1)
		bar.Add(1)
		switch r.Outcome {
		case hongbao.Exhausted:
			c.exhausted.Add(1)
			continue
		case hongbao.OverLimit:
			c.limit.Add(1)
			continue
		case hongbao.Reserved, hongbao.ReservedAlready:
		default:
			return fmt.Errorf("reserve %s %s: outcome %s during the open window", user, order, r.Outcome)
		}
		c.reserved.Add(1)
		if err := d.finish(ctx, user, order, rnd.Float64(), c); err != nil {
			return err
		}
	}
	return nil
}

// finish confirms, cancels or abandons a reservation, as p falls.
func (d *discountDemoCmd) finish(ctx context.Context, user, order string, p float64, c *rushCounts) error {
	f := &d.f
	id := d.d.ID
	switch {
	case p < f.cancelShare:
		_, err := retryDiscount(ctx, func() (hongbao.Reservation, error) { return d.eng.Discounts().Cancel(ctx, id, user, order) })
		if err == nil {
			c.cancelled.Add(1)
		}
		return err
	case p < f.cancelShare+f.abandon:
		c.abandoned.Add(1) // the payment page was closed: it expires
		return nil
	}
	r, err := retryDiscount(ctx, func() (hongbao.Reservation, error) { return d.eng.Discounts().Confirm(ctx, id, user, order) })
	if errors.Is(err, hongbao.ErrReservationExpired) {
		c.late.Add(1) // confirmed after its hold: the payment runs without the discount
		return nil
	}
	if err != nil {
		return err
	}
	c.confirmedCount.Add(1)
	c.confirmedCents.Add(r.Cents)
	return nil
}

// retryDiscount retries a call whose reply was lost or whose queue was
// full: every discount call is idempotent by user and order.
func retryDiscount(ctx context.Context, call func() (hongbao.Reservation, error)) (hongbao.Reservation, error) {
	for attempt := 0; ; attempt++ {
		r, err := call()
		if (errors.Is(err, hongbao.ErrOutcomeUnknown) || errors.Is(err, hongbao.ErrBusy)) && attempt < 10 && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
			}
			continue
		}
		return r, err
	}
}

// closeAndAudit waits for the abandoned reservations to expire (the
// reaper returns them), stops settlement, closes the campaign and audits
// Redis's contents against what the clients were told.
func (d *discountDemoCmd) closeAndAudit(ctx context.Context, rep *discountDemoReport, c *rushCounts) error {
	deadline := time.Now().Add(d.f.hold + 30*time.Second)
	for {
		st, err := d.eng.Discounts().Status(ctx, d.d.ID)
		if err != nil {
			return err
		}
		if st.ReservedCount == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Stopped before the close: running on, it would refund the campaign
	// while the audit reads it.
	d.w.Stop()
	st, err := d.eng.Discounts().CloseCampaign(ctx, d.d.ID)
	if err != nil {
		return err
	}
	a, err := d.eng.Discounts().Audit(ctx, d.d.ID)
	if err != nil {
		return err
	}
	rep.ConfirmedCents, rep.ConfirmedCount = st.ConfirmedCents, st.ConfirmedCount
	rep.RemainingCents, rep.RemainingCount, rep.CompensationCents = st.RemainingCents, st.RemainingCount, st.CompensationCents
	rep.OverLimitUsers = a.OverLimitUsers
	rep.Problems = a.Problems
	if told := c.confirmedCents.Load(); told != st.ConfirmedCents || c.confirmedCount.Load() != st.ConfirmedCount {
		rep.Problems = append(rep.Problems, fmt.Sprintf("clients were told of %d confirmed discounts, %d cents; Redis holds %d, %d cents",
			c.confirmedCount.Load(), told, st.ConfirmedCount, st.ConfirmedCents))
	}
	if st.ReservedCount != 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d reservations still held after their hold", st.ReservedCount))
	}
	rep.ConservationOK = a.OK && len(rep.Problems) == 0 && a.OverLimitUsers == 0 && a.OverOrder == 0 && a.OverMax == 0 &&
		st.ConfirmedCents+st.ReservedCents+st.RemainingCents == st.Budget
	return nil
}

func printDiscountDemo(w io.Writer, rep *discountDemoReport) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	f := hongbao.FormatCents
	p("\nDiscount campaign %s: %s over %d discounts, %d shards\n", rep.Campaign, f(rep.BudgetCents), rep.Quota, rep.Shards)
	p("  orders      %10d  (%d users)\n", rep.Orders, rep.Users)
	p("  reserved    %10d  (then %d cancelled, %d abandoned and expired, %d confirmed too late)\n",
		rep.Reserved, rep.Cancelled, rep.Abandoned, rep.LateConfirms)
	p("  limit       %10d  (users at their count or amount limit)\n", rep.Limit)
	p("  exhausted   %10d\n", rep.Exhausted)
	p("  orders/s    %10.0f  (%.2f s), %d transfers between shards\n", rep.OrdersPerSec, rep.Seconds, rep.Transfers)
	p("\nConservation (from the clients' answers, the pools, the records, usage and the counters):\n")
	p("  confirmed          %14s in %d discounts\n", f(rep.ConfirmedCents), rep.ConfirmedCount)
	p("  left               %14s in %d discounts (%s in compensation)\n", f(rep.RemainingCents), rep.RemainingCount, f(rep.CompensationCents))
	p("  budget             %14s\n", f(rep.BudgetCents))
	p("  users over a limit: %d\n", rep.OverLimitUsers)
	printVerdict(w, rep.ConservationOK, "  OK: every cent and every discount accounted for, no user over a limit", "  FAILED:", rep.Problems)
	if rec := rep.Reconcile; rec != nil {
		p("\nSettlement into the ledger (%s): %d discounts; refunded %s to the funding account; escrow %s; campaign %s\n",
			rep.Ledger, rep.Settled, f(rec.RefundCents), f(rec.EscrowCents), rec.State)
		printVerdict(w, rep.ReconcileOK, "  OK: Redis and the ledger agree to the cent", "  RECONCILE FAILED:", rec.Differences)
	}
}
