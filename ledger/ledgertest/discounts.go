package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// dc is the ledger id of the discount campaign the tests use.
var dc = ledger.DiscountCampaign("d1")

func dsc(user, order string, seq, cents int64) ledger.Discount {
	return ledger.Discount{Campaign: dc, User: user, Order: order, Seq: seq, Cents: cents}
}

func applyDiscounts(t *testing.T, l ledger.Ledger, ds ...ledger.Discount) ledger.DiscountResult {
	t.Helper()
	res, err := l.ApplyDiscounts(ctx, dc, ds)
	require.NoError(t, err)
	return res
}

// readDiscounts returns the stored discounts of dc in seq order.
func readDiscounts(t *testing.T, l ledger.Ledger) []ledger.Discount {
	t.Helper()
	var out []ledger.Discount
	require.NoError(t, l.Discounts(ctx, dc, func(d ledger.Discount) error {
		out = append(out, d)
		return nil
	}))
	return out
}

func testDiscounts(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, dc, 1000)
	first := []ledger.Discount{dsc("a", "o1", 3, 100), dsc("a", "o2", 1, 50), dsc("b", "o1", 2, 200)}
	require.Equal(t, ledger.DiscountResult{Inserted: 3, InsertedCents: 350}, applyDiscounts(t, l, first...),
		"two orders of one user in a batch")
	require.Equal(t, ledger.DiscountResult{Replayed: 3}, applyDiscounts(t, l, first...), "a replay is a no-op")
	require.Equal(t, ledger.DiscountResult{Inserted: 1, Replayed: 2, InsertedCents: 5},
		applyDiscounts(t, l, dsc("c", "o1", 4, 5), dsc("c", "o1", 4, 5), first[0]), "an identical duplicate within a batch is a replay")
	require.Equal(t, ledger.DiscountResult{}, applyDiscounts(t, l), "an empty batch is a no-op")

	require.Equal(t, map[string]int64{
		"user:a": 150, "user:b": 200, "user:c": 5, "escrow:" + dc: 1000 - 355, "funding:ops": -1000,
	}, balances(t, l, "user:a", "user:b", "user:c", "escrow:"+dc, "funding:ops"))
	tot, err := l.Totals(ctx, dc)
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "ops", GrantCount: 4, GrantCents: 355, Escrow: 645}, tot)
	require.Equal(t, []ledger.Discount{dsc("a", "o2", 1, 50), dsc("b", "o1", 2, 200), dsc("a", "o1", 3, 100), dsc("c", "o1", 4, 5)},
		readDiscounts(t, l), "in seq order")

	// The leftover goes back once; escrow ends at 0.
	require.NoError(t, l.Refund(ctx, dc, 645))
	tot, err = l.Totals(ctx, dc)
	require.NoError(t, err)
	require.Zero(t, tot.Escrow)
	require.True(t, tot.RefundDone)
	require.ErrorIs(t, l.Refund(ctx, dc, 600), ledger.ErrConflict)
}

func testDiscountConflicts(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, dc, 1000)
	applyDiscounts(t, l, dsc("a", "o1", 1, 100), dsc("b", "o1", 2, 200))
	res := applyDiscounts(t, l,
		dsc("a", "o1", 1, 101), // the order with another amount
		dsc("a", "o1", 9, 100), // the order on another unit
		dsc("x", "o9", 2, 200), // the unit of another order
		dsc("y", "o1", 3, 10),  // new
		dsc("z", "o1", 3, 10),  // the unit the line above took, in the same batch
	)
	require.Equal(t, 1, res.Inserted)
	require.EqualValues(t, 10, res.InsertedCents)
	require.Zero(t, res.Replayed)
	kinds := make([]ledger.ConflictKind, len(res.Conflicts))
	for i, c := range res.Conflicts {
		kinds[i] = c.Kind
	}
	require.Equal(t, []ledger.ConflictKind{ledger.OrderDiffers, ledger.OrderDiffers, ledger.UnitTaken, ledger.UnitTaken}, kinds)
	require.Equal(t, dsc("a", "o1", 1, 100), res.Conflicts[0].Existing)
	require.Equal(t, dsc("b", "o1", 2, 200), res.Conflicts[2].Existing)
	require.Equal(t, dsc("y", "o1", 3, 10), res.Conflicts[3].Existing)
	require.Equal(t, map[string]int64{"user:a": 100, "user:x": 0, "user:y": 10, "user:z": 0},
		balances(t, l, "user:a", "user:x", "user:y", "user:z"), "conflicts move nothing")
}

func testDiscountsInvalid(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	_, err := l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("a", "o", 1, 1)})
	require.ErrorIs(t, err, ledger.ErrNotFunded)
	fund(t, l, dc, 1000)
	for _, bad := range []ledger.Discount{
		{Campaign: "other", User: "a", Order: "o", Seq: 1, Cents: 1},
		dsc("", "o", 1, 1), dsc("a", "", 1, 1), dsc("a", "o", 0, 1), dsc("a", "o", 1, 0), dsc("a", "o", 1, -1),
	} {
		_, err := l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("ok", "o", 7, 1), bad})
		require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", bad)
	}
	_, err = l.ApplyDiscounts(ctx, "", []ledger.Discount{dsc("a", "o", 1, 1)})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	require.Empty(t, readDiscounts(t, l), "an invalid batch writes nothing")
}

// testDiscountsConcurrent has workers write overlapping batches of one
// campaign's discounts at once: each lands exactly once.
func testDiscountsConcurrent(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const n, workers, size = 600, 5, 40
	ds := make([]ledger.Discount, n)
	var total int64
	for i := range ds {
		// 100 users with 6 orders each, so batches hold users twice.
		ds[i] = dsc(fmt.Sprintf("u%d", i%100), fmt.Sprintf("o%d", i/100), int64(i+1), int64(1+i%17))
		total += ds[i].Cents
	}
	fund(t, l, dc, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sum ledger.DiscountResult
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			off := w * n / workers
			for k := 0; k < n; k += size {
				var b []ledger.Discount
				for j := k; j < k+size && j < n; j++ {
					b = append(b, ds[(off+j)%n])
				}
				res, err := l.ApplyDiscounts(ctx, dc, b)
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				sum.Inserted += res.Inserted
				sum.Replayed += res.Replayed
				sum.InsertedCents += res.InsertedCents
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, ledger.DiscountResult{Inserted: n, Replayed: n*workers - n, InsertedCents: total}, sum)
	require.Equal(t, ds, readDiscounts(t, l))
	tot, err := l.Totals(ctx, dc)
	require.NoError(t, err)
	require.Equal(t, total, tot.GrantCents)
	require.Zero(t, tot.Escrow)
}
