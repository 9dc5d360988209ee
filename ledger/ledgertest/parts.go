package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// The tests of this file have several writers settle disjoint parts of
// one campaign at once, as settle processes that own different shards do,
// each through its own Ledger (its own connections), while a refund or a
// fence races them.

// partGrants returns n grants of campaign "c", one user each, and their
// sum.
func partGrants(n int) ([]ledger.Grant, int64) {
	gs := make([]ledger.Grant, n)
	var total int64
	for i := range gs {
		gs[i] = g("c", int64(i+1), fmt.Sprintf("p%d", i), int64(1+i%11))
		total += gs[i].Cents
	}
	return gs, total
}

// writeParts has one goroutine per ledger write its part of grants: the
// batches i (of size grants each) with i % len(ls) == w, each by a call
// of call(w, i, batch). It returns each batch's error.
func writeParts(ls []ledger.Ledger, grants []ledger.Grant, size int, call func(w, i int, b []ledger.Grant) error) []error {
	batches := (len(grants) + size - 1) / size
	errs := make([]error, batches)
	var wg sync.WaitGroup
	for w := range ls {
		wg.Go(func() {
			for i := w; i < batches; i += len(ls) {
				errs[i] = call(w, i, grants[i*size:min((i+1)*size, len(grants))])
			}
		})
	}
	wg.Wait()
	return errs
}

// progress counts the grants committed and closes reached once they are
// at least at.
type progress struct {
	atomic.Int64
	at      int64
	once    sync.Once
	reached chan struct{}
}

func newProgress(at int64) *progress { return &progress{at: at, reached: make(chan struct{})} }

func (p *progress) Add(n int64) {
	if p.Int64.Add(n) >= p.at {
		p.once.Do(func() { close(p.reached) })
	}
}

// testTwoWritersDisjoint: two writers settle the two halves of a campaign
// concurrently; both commit everything and the totals and balances are
// exact.
func testTwoWritersDisjoint(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	grants, total := partGrants(2000)
	fund(t, ls[0], "c", total+5)
	errs := writeParts(ls, grants, 50, func(w, _ int, b []ledger.Grant) error {
		res, err := ls[w].ApplyGrants(ctx, "c", b)
		if err == nil && res.Inserted != len(b) {
			err = fmt.Errorf("inserted %d of %d", res.Inserted, len(b))
		}
		return err
	})
	require.NoError(t, errors.Join(errs...))
	tot, err := ls[1].Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: total + 5, Funding: "ops", GrantCount: int64(len(grants)), GrantCents: total, Escrow: 5}, tot)
	for _, gr := range grants[:100] {
		b, err := ls[0].Balance(ctx, ledger.UserAccount(gr.User))
		require.NoError(t, err)
		require.Equal(t, gr.Cents, b, gr.User)
	}
	require.NoError(t, ls[0].Refund(ctx, "c", 5))
	requireSettledBalances(t, ls[1], grants, 0)
}

// requireSettledBalances checks every user's balance against their
// grant, and the escrow.
func requireSettledBalances(t *testing.T, l ledger.Ledger, grants []ledger.Grant, escrow int64) {
	t.Helper()
	for _, gr := range grants {
		b, err := l.Balance(ctx, ledger.UserAccount(gr.User))
		require.NoError(t, err)
		require.Equal(t, gr.Cents, b, gr.User)
	}
	b, err := l.Balance(ctx, "escrow:c")
	require.NoError(t, err)
	require.Equal(t, escrow, b)
}

// testRefundRacingBatches: a refund lands while two writers are settling.
// Every batch commits whole before it or is refused whole after it
// (RefusedAfterRefund); what the ledger holds is exactly the batches that
// committed, and the escrow ends at 0.
func testRefundRacingBatches(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	refunder := open(t)
	grants, total := partGrants(3000)
	fund(t, ls[0], "c", total)
	committed := newProgress(500)
	var refunded atomic.Bool
	var refundErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-committed.reached // some batches are in
		// Refund what is not granted by the totals just read; a batch
		// committing in between makes the refund overdraw, refused:
		// read again.
		for {
			tot, err := refunder.Totals(ctx, "c")
			if err != nil {
				refundErr = err
				return
			}
			err = refunder.Refund(ctx, "c", tot.Funded-tot.GrantCents)
			if err == nil {
				refunded.Store(true)
				return
			}
			var re *ledger.RefusedError
			if !errors.As(err, &re) || re.Reason != ledger.RefusedOverdraw {
				refundErr = err
				return
			}
		}
	}()
	var refusedAfter atomic.Int64
	errs := writeParts(ls, grants, 25, func(w, _ int, b []ledger.Grant) error {
		if refunded.Load() {
			return nil // the rest would be refused too
		}
		res, err := ls[w].ApplyGrants(ctx, "c", b)
		var re *ledger.RefusedError
		switch {
		case err == nil && res.Inserted == len(b):
			committed.Add(int64(len(b)))
			return nil
		case errors.As(err, &re) && re.Reason == ledger.RefusedAfterRefund:
			refusedAfter.Add(1)
			return nil
		}
		return fmt.Errorf("batch: %+v %w", res, err)
	})
	<-done
	require.NoError(t, refundErr)
	require.NoError(t, errors.Join(errs...))
	require.True(t, refunded.Load())
	tot, err := ls[0].Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, committed.Load(), tot.GrantCount, "the ledger holds exactly the batches that committed")
	require.True(t, tot.RefundDone)
	require.Equal(t, tot.Funded, tot.GrantCents+tot.Refunded)
	require.Zero(t, tot.Escrow)
	t.Logf("%d grants committed, %d batches refused after the refund", committed.Load(), refusedAfter.Load())
	// Every committed grant is in its user's balance (rolled up), nothing
	// else is.
	n := 0
	require.NoError(t, ls[1].Grants(ctx, "c", func(gr ledger.Grant) error {
		b, err := ls[1].Balance(ctx, ledger.UserAccount(gr.User))
		require.NoError(t, err)
		require.Equal(t, gr.Cents, b)
		n++
		return nil
	}))
	require.EqualValues(t, tot.GrantCount, n)
}

// testFenceRacingBatches: a rebuild's Fence lands while two writers settle
// under fence 0. Each batch commits whole or is ErrFenced with nothing
// written; once Fence returned, no batch under fence 0 commits.
func testFenceRacingBatches(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	grants, total := partGrants(2000)
	fund(t, ls[0], "c", total)
	fencer := open(t)
	committed := newProgress(300)
	var fenced atomic.Bool
	done := make(chan error, 1)
	go func() {
		<-committed.reached
		_, err := fencer.Fence(ctx, "c")
		fenced.Store(true)
		done <- err
	}()
	old := ledger.WithFence(ctx, 0)
	errs := writeParts(ls, grants, 25, func(w, _ int, b []ledger.Grant) error {
		after := fenced.Load()
		res, err := ls[w].ApplyGrants(old, "c", b)
		switch {
		case err == nil && !after && res.Inserted == len(b):
			committed.Add(int64(len(b)))
			return nil
		case errors.Is(err, ledger.ErrFenced):
			return nil
		}
		return fmt.Errorf("batch (fence returned before it: %v): %+v %w", after, res, err)
	})
	require.NoError(t, <-done)
	require.NoError(t, errors.Join(errs...))
	tot, err := ls[0].Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, committed.Load(), tot.GrantCount)
	require.Equal(t, total-tot.GrantCents, tot.Escrow)
}

// testRollUp: a user's Balance is the sum of their grants and discounts
// before the refunds roll them up, after the first and after the second;
// replays after the roll-up move nothing.
func testRollUp(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c1", 1000)
	fund(t, l, "c2", 1000)
	fund(t, l, dc, 1000)
	c1 := []ledger.Grant{g("c1", 1, "a", 100), g("c1", 2, "b", 200)}
	c2 := []ledger.Grant{g("c2", 1, "a", 30), g("c2", 2, "c", 40)}
	ds := []ledger.Discount{dsc("a", "o1", 1, 5), dsc("a", "o2", 2, 6), dsc("b", "o1", 3, 7)}
	want := map[string]int64{"user:a": 141, "user:b": 207, "user:c": 40, "user:d": 0}
	accounts := []string{"user:a", "user:b", "user:c", "user:d"}
	replayAll := func() {
		t.Helper()
		r1, err := l.ApplyGrants(ctx, "c1", c1)
		require.NoError(t, err)
		require.Equal(t, ledger.ApplyResult{Replayed: 2}, r1)
		r2, err := l.ApplyGrants(ctx, "c2", c2)
		require.NoError(t, err)
		require.Equal(t, ledger.ApplyResult{Replayed: 2}, r2)
		r3, err := l.ApplyDiscounts(ctx, dc, ds)
		require.NoError(t, err)
		require.Equal(t, ledger.DiscountResult{Replayed: 3}, r3)
	}
	apply(t, l, "c1", c1...)
	apply(t, l, "c2", c2...)
	applyDiscounts(t, l, ds...)
	require.Equal(t, want, balances(t, l, accounts...), "before any roll-up")
	replayAll()
	require.NoError(t, l.Refund(ctx, "c1", 700))
	require.Equal(t, want, balances(t, l, accounts...), "c1 rolled up")
	replayAll()
	require.Equal(t, want, balances(t, l, accounts...), "replays after the roll-up")
	require.NoError(t, l.Refund(ctx, dc, 982))
	require.NoError(t, l.Refund(ctx, "c2", 930))
	require.NoError(t, l.Refund(ctx, "c2", 930), "a replayed refund rolls up nothing again")
	replayAll()
	require.Equal(t, want, balances(t, l, accounts...), "all rolled up")
	require.Equal(t, map[string]int64{"escrow:c1": 0, "escrow:c2": 0, "escrow:" + dc: 0, "funding:ops": -3000 + 700 + 982 + 930},
		balances(t, l, "escrow:c1", "escrow:c2", "escrow:"+dc, "funding:ops"))
}
