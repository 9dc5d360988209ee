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

// The tests of this file race writers that must never disagree: a
// zombie and the new holder of a part writing the same batches, refunds
// of one campaign, and readers (Balance, Totals) against the writes and
// the roll-up they read across.

// replayWriters has each ledger write all of items in batches, writer w
// in batches of sizes[w], and returns what each call inserted and
// replayed; write returns the counts of one batch.
func replayWriters[T any](ls []ledger.Ledger, items []T, sizes []int,
	write func(l ledger.Ledger, b []T) (inserted, replayed int, err error)) (inserted, replayed int64, err error) {
	var ins, rep atomic.Int64
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for w, l := range ls {
		wg.Go(func() {
			for k := 0; k < len(items); k += sizes[w] {
				b := items[k:min(k+sizes[w], len(items))]
				i, r, err := write(l, b)
				if err == nil && i+r != len(b) {
					err = fmt.Errorf("writer %d: %d inserted + %d replayed of %d", w, i, r, len(b))
				}
				if err != nil {
					errs[w] = fmt.Errorf("writer %d, batch at %d: %w", w, k, err)
					return
				}
				ins.Add(int64(i))
				rep.Add(int64(r))
			}
		})
	}
	wg.Wait()
	return ins.Load(), rep.Load(), errors.Join(errs...)
}

// testReplaysRacingExactEscrow: three processes (a zombie among them)
// write every grant of a campaign whose escrow holds exactly their sum,
// with batches cut differently, all at once. A replay is never refused,
// so every call succeeds; every grant is inserted once.
func testReplaysRacingExactEscrow(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t), open(t)}
	grants, total := partGrants(400)
	fund(t, ls[0], "c", total)
	ins, rep, err := replayWriters(ls, grants, []int{50, 50, 37}, func(l ledger.Ledger, b []ledger.Grant) (int, int, error) {
		res, err := l.ApplyGrants(ctx, "c", b)
		if err == nil && len(res.Conflicts) > 0 {
			err = fmt.Errorf("conflicts in replays: %+v", res.Conflicts)
		}
		return res.Inserted, res.Replayed, err
	})
	require.NoError(t, err)
	require.EqualValues(t, len(grants), ins)
	require.EqualValues(t, 2*len(grants), rep)
	require.Equal(t, ledger.Totals{Funded: total, Funding: "ops", GrantCount: int64(len(grants)), GrantCents: total},
		totals(t, ls[1], "c"))
	require.NoError(t, ls[2].Refund(ctx, "c", 0))
	requireSettledBalances(t, ls[0], grants, 0)
}

// testDiscountReplaysRacing: testReplaysRacingExactEscrow for discounts.
func testDiscountReplaysRacing(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t), open(t)}
	ds := make([]ledger.Discount, 450)
	var total int64
	for i := range ds {
		ds[i] = dsc(fmt.Sprintf("u%d", i%150), fmt.Sprintf("o%d", i/150), int64(i+1), int64(1+i%7))
		total += ds[i].Cents
	}
	fund(t, ls[0], dc, total)
	ins, rep, err := replayWriters(ls, ds, []int{40, 40, 29}, func(l ledger.Ledger, b []ledger.Discount) (int, int, error) {
		res, err := l.ApplyDiscounts(ctx, dc, b)
		if err == nil && len(res.Conflicts) > 0 {
			err = fmt.Errorf("conflicts in replays: %+v", res.Conflicts)
		}
		return res.Inserted, res.Replayed, err
	})
	require.NoError(t, err)
	require.EqualValues(t, len(ds), ins)
	require.EqualValues(t, 2*len(ds), rep)
	tot := totals(t, ls[1], dc)
	require.Equal(t, int64(len(ds)), tot.GrantCount)
	require.Equal(t, total, tot.GrantCents)
	require.Zero(t, tot.Escrow)
	require.NoError(t, ls[2].Refund(ctx, dc, 0))
	want := map[string]int64{}
	for _, d := range ds {
		want[ledger.UserAccount(d.User)] += d.Cents
	}
	for acct, w := range want {
		b, err := ls[0].Balance(ctx, acct)
		require.NoError(t, err)
		require.Equal(t, w, b, acct)
	}
}

// testRefundsRacing: refunds of one campaign race each other, some with
// the right cents and some with wrong ones, while a zombie replays every
// batch. The right ones all succeed (one refunds, the others replay),
// the wrong ones all fail, no replay is refused, and the refund's cents
// land once; so does the roll-up after it.
func testRefundsRacing(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	grants, total := partGrants(300)
	fund(t, l, "c", total+100)
	for k := 0; k < len(grants); k += 50 {
		apply(t, l, "c", grants[k:k+50]...)
	}
	amounts := []int64{100, 99, 100, 101, 100}
	errs := make([]error, len(amounts))
	var wg sync.WaitGroup
	for i, cents := range amounts {
		r := open(t)
		wg.Go(func() { errs[i] = r.Refund(ctx, "c", cents) })
	}
	zombie := open(t)
	var zerr error
	wg.Go(func() {
		for k := 0; k < len(grants) && zerr == nil; k += 50 {
			res, err := zombie.ApplyGrants(ctx, "c", grants[k:k+50])
			if err == nil && res.Replayed != 50 {
				err = fmt.Errorf("replay at %d: %+v", k, res)
			}
			zerr = err
		}
	})
	wg.Wait()
	require.NoError(t, zerr, "a replay racing the refund")
	for i, cents := range amounts {
		if cents == 100 {
			require.NoError(t, errs[i], "refund of %d", cents)
		} else {
			require.Error(t, errs[i], "refund of %d", cents)
		}
	}
	tot := totals(t, l, "c")
	require.Equal(t, ledger.Totals{Funded: total + 100, Funding: "ops", GrantCount: int64(len(grants)), GrantCents: total,
		Refunded: 100, RefundDone: true}, tot)
	requireSettledBalances(t, l, grants, 0)
	done, err := l.RollUp(ctx, "c")
	require.NoError(t, err)
	require.True(t, done)
	requireSettledBalances(t, l, grants, 0)
	require.Equal(t, -total, balances(t, l, "funding:ops")["funding:ops"])
}

// testBalanceDuringRollUp: readers read users' balances while their
// campaigns are refunded and rolled up; every read is exact, never a
// grant missed or counted twice.
func testBalanceDuringRollUp(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c1", 10_000)
	fund(t, l, "c2", 10_000)
	var c1, c2 []ledger.Grant
	want := map[string]int64{}
	var s1, s2 int64
	for i := range 200 {
		u := fmt.Sprintf("u%d", i)
		c1 = append(c1, g("c1", int64(i+1), u, int64(1+i%9)))
		s1 += c1[i].Cents
		want[ledger.UserAccount(u)] = c1[i].Cents
		if i%2 == 0 {
			gr := g("c2", int64(i+1), u, 5)
			c2 = append(c2, gr)
			s2 += 5
			want[ledger.UserAccount(u)] += 5
		}
	}
	apply(t, l, "c1", c1...)
	apply(t, l, "c2", c2...)
	readers := []ledger.Ledger{open(t), open(t)}
	for _, refund := range []struct {
		id    string
		cents int64
	}{{"c1", 10_000 - s1}, {"c2", 10_000 - s2}} {
		var stop atomic.Bool
		var reads atomic.Int64
		errs := make([]error, len(readers))
		var wg sync.WaitGroup
		for r, rl := range readers {
			wg.Go(func() {
				for i := r; !stop.Load() || i < 100; i++ {
					acct := ledger.UserAccount(fmt.Sprintf("u%d", i%200))
					b, err := rl.Balance(ctx, acct)
					if err == nil && b != want[acct] {
						err = fmt.Errorf("%s read %d, want %d (during the refund and roll-up of %s)", acct, b, want[acct], refund.id)
					}
					if err != nil {
						errs[r] = err
						return
					}
					reads.Add(1)
				}
			})
		}
		require.NoError(t, l.Refund(ctx, refund.id, refund.cents))
		done, err := l.RollUp(ctx, refund.id)
		require.NoError(t, err)
		require.True(t, done)
		stop.Store(true)
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		t.Logf("%d balance reads around the refund of %s", reads.Load(), refund.id)
	}
	require.Equal(t, want, balances(t, l, func() []string {
		var as []string
		for a := range want {
			as = append(as, a)
		}
		return as
	}()...))
}

// testTotalsWhileBatchesCommit: Totals read while two writers commit
// disjoint parts and the refund lands is always one consistent state:
// escrow = funded - granted - refunded, the counts never go back.
func testTotalsWhileBatchesCommit(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	reader := open(t)
	grants := make([]ledger.Grant, 1000)
	for i := range grants {
		grants[i] = g("c", int64(i+1), fmt.Sprintf("p%d", i), 3)
	}
	total := int64(3*len(grants) + 7)
	fund(t, ls[0], "c", total)
	var stop atomic.Bool
	var rerr error
	var reads int
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last ledger.Totals
		for !stop.Load() {
			tot, err := reader.Totals(ctx, "c")
			switch {
			case err != nil:
			case tot.Escrow != tot.Funded-tot.GrantCents-tot.Refunded:
				err = fmt.Errorf("inconsistent totals %+v", tot)
			case tot.GrantCents != 3*tot.GrantCount:
				err = fmt.Errorf("count and cents from different moments: %+v", tot)
			case tot.GrantCount < last.GrantCount || (last.RefundDone && !tot.RefundDone):
				err = fmt.Errorf("totals went back: %+v after %+v", tot, last)
			}
			if err != nil {
				rerr = err
				return
			}
			last = tot
			reads++
		}
	}()
	errs := writeParts(ls, grants, 40, func(w, _ int, b []ledger.Grant) error {
		_, err := ls[w].ApplyGrants(ctx, "c", b)
		return err
	})
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, ls[1].Refund(ctx, "c", 7))
	stop.Store(true)
	<-done
	require.NoError(t, rerr)
	t.Logf("%d consistent totals read", reads)
}
