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

// checkBalances runs CheckBalances and returns what it found.
func checkBalances(t *testing.T, l ledger.Ledger) (ledger.BalanceCheck, []ledger.BalanceDifference) {
	t.Helper()
	var ds []ledger.BalanceDifference
	c, err := l.CheckBalances(ctx, func(d ledger.BalanceDifference) error {
		ds = append(ds, d)
		return nil
	})
	require.NoError(t, err)
	return c, ds
}

// testCheckBalances: after grants, replays, conflicts, refunds, a
// roll-up and discounts, every stored balance is what the journal says,
// and the sums hold: the stored balances miss exactly the credits of the
// campaigns not rolled up (d, refunded and waiting; the discounts of e,
// live).
func testCheckBalances(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	c, ds := checkBalances(t, l)
	require.Empty(t, ds)
	require.Equal(t, ledger.BalanceCheck{}, c, "an empty ledger")
	require.True(t, c.OK())

	fund(t, l, "c", 1000)
	fund(t, l, "d", 50)
	gs := []ledger.Grant{g("c", 1, "a", 100), g("c", 2, "b", 200), g("c", 2, "x", 200), g("c", 3, "a", 1)}
	apply(t, l, "c", gs...)
	apply(t, l, "c", gs...)
	apply(t, l, "d", g("d", 1, "a", 7))
	require.NoError(t, l.Refund(ctx, "c", 700))
	require.NoError(t, l.Refund(ctx, "d", 43))
	done, err := l.RollUp(ctx, "c")
	require.NoError(t, err)
	require.True(t, done)
	fund(t, l, dc, 500)
	for range 2 {
		applyDiscounts(t, l, dsc("a", "1", 1, 40), dsc("a", "2", 2, 60), dsc("q", "1", 3, 5), dsc("x", "1", 3, 5))
	}

	c, ds = checkBalances(t, l)
	require.Empty(t, ds)
	// escrow:c, escrow:d, escrow:discount:d1, funding:ops, user:a, user:b,
	// user:q; never user:x, whose grant and discount conflicted.
	require.Equal(t, ledger.BalanceCheck{Accounts: 7, StoredSum: -112, PendingSum: 112}, c)
	require.True(t, c.OK())

	done, err = l.RollUp(ctx, "d")
	require.NoError(t, err)
	require.True(t, done)
	c, ds = checkBalances(t, l)
	require.Empty(t, ds)
	require.Equal(t, ledger.BalanceCheck{Accounts: 7, StoredSum: -105, PendingSum: 105}, c)
}

// TamperedBalances checks that CheckBalances reports stored balances
// edited behind the ledger's back, with the right numbers. l must be
// empty; tamper runs a statement on its database (the backends' tests
// give their own).
func TamperedBalances(t *testing.T, l ledger.Ledger, tamper func(stmt string) error) {
	t.Helper()
	fund(t, l, "c", 1000)
	apply(t, l, "c", g("c", 1, "a", 100), g("c", 2, "b", 200))
	require.NoError(t, l.Refund(ctx, "c", 700))
	done, err := l.RollUp(ctx, "c")
	require.NoError(t, err)
	require.True(t, done)
	fund(t, l, "d", 50)
	apply(t, l, "d", g("d", 1, "a", 7))
	for _, stmt := range []string{
		`UPDATE ledger_accounts SET balance = balance + 5 WHERE id = 'user:a'`,
		`UPDATE ledger_accounts SET balance = balance - 1 WHERE id = 'escrow:d'`,
		`INSERT INTO ledger_accounts (id, balance) VALUES ('user:ghost', 4)`,
	} {
		require.NoError(t, tamper(stmt), stmt)
	}

	c, ds := checkBalances(t, l)
	require.Equal(t, []ledger.BalanceDifference{
		{Account: "escrow:d", Stored: 42, Derived: 43},
		{Account: "user:a", Stored: 105, Derived: 100, Pending: 7},
		{Account: "user:ghost", Stored: 4},
	}, ds)
	// escrow:c, escrow:d, funding:ops, user:a, user:b, user:ghost.
	require.Equal(t, ledger.BalanceCheck{Accounts: 6, Differences: 3, StoredSum: 1, PendingSum: 7}, c)
	require.False(t, c.OK())

	stop := errors.New("stop")
	var seen int
	_, err = l.CheckBalances(ctx, func(ledger.BalanceDifference) error {
		seen++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, seen, "an error from fn stops the walk")
}

// testCheckBalancesWhileBatchesCommit: CheckBalances run again and again
// while two writers commit batches of grants and discounts, refund and
// roll their campaigns up never reports a difference and its sums always
// hold: each run reads one snapshot, in which a batch, a refund or a
// roll-up is all there or not at all.
func testCheckBalancesWhileBatchesCommit(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	reader := open(t)
	camps := []string{"c0", "c1", "c2", dc}
	for _, id := range camps {
		fund(t, ls[0], id, 3*300+5)
	}
	var stop atomic.Bool
	var runs, pendingSeen atomic.Int64
	var rerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; !stop.Load() || n < 3; n++ {
			c, err := reader.CheckBalances(ctx, func(d ledger.BalanceDifference) error {
				return fmt.Errorf("difference while batches commit: %+v", d)
			})
			if err == nil && !c.OK() {
				err = fmt.Errorf("sums do not hold while batches commit: %+v", c)
			}
			if err != nil {
				rerr = err
				return
			}
			if c.PendingSum > 0 {
				pendingSeen.Add(1)
			}
			runs.Add(1)
		}
	}()
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for w, l := range ls {
		wg.Go(func() { errs[w] = settleCampaigns(l, camps[w*2:w*2+2]) })
	}
	wg.Wait()
	stop.Store(true)
	<-done
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, rerr)
	require.Positive(t, pendingSeen.Load(), "some check ran before a roll-up")
	c, ds := checkBalances(t, reader)
	require.Empty(t, ds)
	require.Equal(t, ledger.BalanceCheck{Accounts: 4 + 1 + 300}, c, "every campaign rolled up")
	t.Logf("%d balance checks while batches committed", runs.Load())
}

// settleCampaigns writes 300 entries of 3 cents to each campaign, in
// batches of 20 (grants to users u0..u299, discounts to u0..u149, two
// orders each), then refunds and rolls it up.
func settleCampaigns(l ledger.Ledger, camps []string) error {
	for _, id := range camps {
		for k := 0; k < 300; k += 20 {
			var err error
			if id == dc {
				ds := make([]ledger.Discount, 20)
				for i := range ds {
					ds[i] = dsc(fmt.Sprintf("u%d", (k+i)%150), fmt.Sprint(k+i), int64(k+i+1), 3)
				}
				_, err = l.ApplyDiscounts(ctx, dc, ds)
			} else {
				gs := make([]ledger.Grant, 20)
				for i := range gs {
					gs[i] = g(id, int64(k+i+1), fmt.Sprintf("u%d", k+i), 3)
				}
				_, err = l.ApplyGrants(ctx, id, gs)
			}
			if err != nil {
				return fmt.Errorf("%s at %d: %w", id, k, err)
			}
		}
		if err := l.Refund(ctx, id, 5); err != nil {
			return err
		}
		if _, err := l.RollUp(ctx, id); err != nil {
			return err
		}
	}
	return nil
}
