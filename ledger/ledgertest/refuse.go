package ledgertest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// requireRefused checks that err is a *RefusedError of entry, for reason.
func requireRefused(t *testing.T, err error, entry string, reason ledger.Refusal) *ledger.RefusedError {
	t.Helper()
	require.ErrorIs(t, err, ledger.ErrRefused)
	var re *ledger.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, entry, re.Entry)
	require.Equal(t, reason, re.Reason)
	return re
}

// requireUnchanged checks that a refused call wrote nothing: the
// campaign's totals and the accounts are what they were.
func requireUnchanged(t *testing.T, l ledger.Ledger, campaign string, before ledger.Totals, accounts map[string]int64) {
	t.Helper()
	tot, err := l.Totals(ctx, campaign)
	require.NoError(t, err)
	require.Equal(t, before, tot)
	names := make([]string, 0, len(accounts))
	for a := range accounts {
		names = append(names, a)
	}
	require.Equal(t, accounts, balances(t, l, names...))
}

// testRefuseAfterRefund: once a campaign's refund is recorded its escrow
// is closed: a replay of a stored grant is still a no-op, a new grant
// (alone or beside replays) is refused and writes nothing.
func testRefuseAfterRefund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	apply(t, l, "c", g("c", 1, "a", 300))
	require.NoError(t, l.Refund(ctx, "c", 700))
	before, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	accts := balances(t, l, "escrow:c", "funding:ops", "user:a", "user:b")

	require.Equal(t, ledger.ApplyResult{Replayed: 1}, apply(t, l, "c", g("c", 1, "a", 300)), "a replay after the refund is a no-op")
	_, err = l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 2, "b", 50)})
	re := requireRefused(t, err, "grant", ledger.RefusedAfterRefund)
	require.Equal(t, "c", re.Campaign)
	require.EqualValues(t, 50, re.Cents)
	_, err = l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 1, "a", 300), g("c", 2, "b", 50)})
	requireRefused(t, err, "grant", ledger.RefusedAfterRefund)
	requireUnchanged(t, l, "c", before, accts)

	// A conflict is still reported as one, not refused: it writes nothing.
	res := apply(t, l, "c", g("c", 1, "x", 300))
	require.Len(t, res.Conflicts, 1)
	requireUnchanged(t, l, "c", before, accts)
}

// testRefuseDiscountAfterRefund: the same for confirmed discounts.
func testRefuseDiscountAfterRefund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, dc, 1000)
	applyDiscounts(t, l, dsc("a", "o1", 1, 100))
	require.NoError(t, l.Refund(ctx, dc, 900))
	before, err := l.Totals(ctx, dc)
	require.NoError(t, err)
	accts := balances(t, l, "escrow:"+dc, "funding:ops", "user:a", "user:b")

	require.Equal(t, ledger.DiscountResult{Replayed: 1}, applyDiscounts(t, l, dsc("a", "o1", 1, 100)))
	_, err = l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("a", "o1", 1, 100), dsc("b", "o1", 2, 10)})
	re := requireRefused(t, err, "discount", ledger.RefusedAfterRefund)
	require.EqualValues(t, 10, re.Cents)
	requireUnchanged(t, l, dc, before, accts)
}

// testRefuseOverdraw: a batch that would take the escrow below zero is
// refused as a whole; what fits goes in, to exactly zero.
func testRefuseOverdraw(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 100)
	apply(t, l, "c", g("c", 1, "a", 60))
	before, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	accts := balances(t, l, "escrow:c", "user:a", "user:b", "user:c")

	_, err = l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 2, "b", 30), g("c", 3, "c", 20)})
	re := requireRefused(t, err, "grant", ledger.RefusedOverdraw)
	require.EqualValues(t, 40, re.Escrow)
	require.EqualValues(t, 50, re.Cents)
	requireUnchanged(t, l, "c", before, accts)

	require.Equal(t, 2, apply(t, l, "c", g("c", 2, "b", 30), g("c", 3, "c", 10)).Inserted, "to exactly zero")
	_, err = l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 4, "d", 1)})
	requireRefused(t, err, "grant", ledger.RefusedOverdraw)
	b, err := l.Balance(ctx, "escrow:c")
	require.NoError(t, err)
	require.Zero(t, b)
}

// testRefuseDiscountOverdraw: the same for confirmed discounts.
func testRefuseDiscountOverdraw(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, dc, 100)
	applyDiscounts(t, l, dsc("a", "o1", 1, 90))
	before, err := l.Totals(ctx, dc)
	require.NoError(t, err)
	accts := balances(t, l, "escrow:"+dc, "user:a", "user:b")
	_, err = l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("b", "o1", 2, 11)})
	re := requireRefused(t, err, "discount", ledger.RefusedOverdraw)
	require.EqualValues(t, 10, re.Escrow)
	requireUnchanged(t, l, dc, before, accts)
}

// testRefuseRefund: the refund must empty the escrow exactly. One that
// would leave cents in it (grants the ledger lacks: outstanding entries)
// or take it below zero is refused and recorded nowhere, so the right one
// still goes in.
func testRefuseRefund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	apply(t, l, "c", g("c", 1, "a", 300))
	before, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	accts := balances(t, l, "escrow:c", "funding:ops")

	re := requireRefused(t, l.Refund(ctx, "c", 600), "refund", ledger.RefusedOutstanding)
	require.EqualValues(t, 700, re.Escrow)
	require.EqualValues(t, 600, re.Cents)
	requireRefused(t, l.Refund(ctx, "c", 0), "refund", ledger.RefusedOutstanding)
	requireRefused(t, l.Refund(ctx, "c", 701), "refund", ledger.RefusedOverdraw)
	requireUnchanged(t, l, "c", before, accts)

	require.NoError(t, l.Refund(ctx, "c", 700))
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.True(t, tot.RefundDone)
	require.Zero(t, tot.Escrow)

	// A discount campaign's refund follows the same rule.
	fund(t, l, dc, 500)
	applyDiscounts(t, l, dsc("a", "o1", 1, 200))
	requireRefused(t, l.Refund(ctx, dc, 500), "refund", ledger.RefusedOverdraw)
	require.NoError(t, l.Refund(ctx, dc, 300))
}

// testRefuseConcurrent: two ledgers on one database, racing batches that
// together overdraw one escrow: what commits never exceeds the fund, and
// each batch either goes in whole or is refused whole.
func testRefuseConcurrent(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	const workers, size, cents = 8, 5, 10
	fund(t, ls[0], "c", 3*size*cents) // room for three batches of eight
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, refused int
	for w := range workers {
		wg.Go(func() {
			gs := make([]ledger.Grant, size)
			for i := range gs {
				seq := int64(w*size + i + 1)
				gs[i] = g("c", seq, "u"+string(rune('a'+w))+string(rune('a'+i)), cents)
			}
			res, err := ls[w%2].ApplyGrants(ctx, "c", gs)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res.Inserted == size:
				ok++
			case err != nil && isRefused(err):
				refused++
			default:
				t.Errorf("batch %d: %+v %v", w, res, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, 3, ok)
	require.Equal(t, workers-3, refused)
	tot, err := ls[0].Totals(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 3*size, tot.GrantCount)
	require.Zero(t, tot.Escrow)
}

func isRefused(err error) bool {
	var re *ledger.RefusedError
	return errors.As(err, &re) && re.Reason == ledger.RefusedOverdraw
}

// testFence: a rebuild's Fence refuses every write prepared under an older
// fence (ErrFenced, nothing written), takes those under the new one, and
// leaves writes that carry no fence unchecked.
func testFence(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	_, err := l.Fence(ctx, "nope")
	require.ErrorIs(t, err, ledger.ErrNotFunded)
	fund(t, l, "c", 1000)
	old := ledger.WithFence(ctx, 0)
	_, err = l.ApplyGrants(old, "c", []ledger.Grant{g("c", 1, "a", 100)})
	require.NoError(t, err, "fence 0 is every campaign's until a rebuild")

	f, err := l.Fence(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 1, f)
	f, err = l.Fence(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 2, f)
	before, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	accts := balances(t, l, "escrow:c", "user:b", "funding:ops")

	for _, stale := range []int64{0, 1} {
		sctx := ledger.WithFence(ctx, stale)
		_, err = l.ApplyGrants(sctx, "c", []ledger.Grant{g("c", 2, "b", 100)})
		require.ErrorIs(t, err, ledger.ErrFenced)
		require.NotErrorIs(t, err, ledger.ErrRefused, "a fenced batch is retried, not dead-lettered")
		require.ErrorIs(t, l.Refund(sctx, "c", 900), ledger.ErrFenced)
	}
	requireUnchanged(t, l, "c", before, accts)

	now := ledger.WithFence(ctx, 2)
	require.Equal(t, 1, apply(t, l, "c", g("c", 2, "b", 100)).Inserted, "no fence: not checked")
	res, err := l.ApplyGrants(now, "c", []ledger.Grant{g("c", 3, "c", 100)})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	require.NoError(t, l.Refund(now, "c", 700))

	fund(t, l, dc, 100)
	_, err = l.Fence(ctx, dc)
	require.NoError(t, err)
	_, err = l.ApplyDiscounts(ledger.WithFence(ctx, 0), dc, []ledger.Discount{dsc("a", "o1", 1, 10)})
	require.ErrorIs(t, err, ledger.ErrFenced)
	res2, err := l.ApplyDiscounts(ledger.WithFence(ctx, 1), dc, []ledger.Discount{dsc("a", "o1", 1, 10)})
	require.NoError(t, err)
	require.Equal(t, 1, res2.Inserted)
}
