package ledgertest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// requireAs checks that err is sentinel and, behind it, an E, which it
// returns.
func requireAs[E error](t *testing.T, err, sentinel error) E {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var e E
	require.ErrorAs(t, err, &e)
	return e
}

// requireRefused checks that err is a *RefusedError of entry, for reason.
func requireRefused(t *testing.T, err error, entry string, reason ledger.Refusal) *ledger.RefusedError {
	t.Helper()
	re := requireAs[*ledger.RefusedError](t, err, ledger.ErrRefused)
	require.Equal(t, entry, re.Entry)
	require.Equal(t, reason, re.Reason)
	return re
}

// snapshot is a campaign's totals and some accounts' balances, taken
// before calls that must write nothing.
type snapshot struct {
	campaign string
	totals   ledger.Totals
	accounts map[string]int64
}

// snap takes a snapshot of the campaign and the accounts.
func snap(t *testing.T, l ledger.Ledger, campaign string, accounts ...string) snapshot {
	t.Helper()
	tot, err := l.Totals(ctx, campaign)
	require.NoError(t, err)
	return snapshot{campaign: campaign, totals: tot, accounts: balances(t, l, accounts...)}
}

// requireUnchanged checks that refused calls wrote nothing: the
// campaign's totals and the accounts are what they were at s.
func (s snapshot) requireUnchanged(t *testing.T, l ledger.Ledger) {
	t.Helper()
	tot, err := l.Totals(ctx, s.campaign)
	require.NoError(t, err)
	require.Equal(t, s.totals, tot)
	names := make([]string, 0, len(s.accounts))
	for a := range s.accounts {
		names = append(names, a)
	}
	require.Equal(t, s.accounts, balances(t, l, names...))
}

// requireRefused checks that err is a *RefusedError of entry, for reason,
// and that nothing changed since s: a refusal writes nothing.
func (s snapshot) requireRefused(t *testing.T, l ledger.Ledger, err error, entry string, reason ledger.Refusal) *ledger.RefusedError {
	t.Helper()
	re := requireRefused(t, err, entry, reason)
	s.requireUnchanged(t, l)
	return re
}

// entry is a grant or a discount in the refusal tests, which run the
// same for both kinds.
type entry struct {
	seq   int64
	user  string
	cents int64
}

// entryKind writes entries of one kind: grants of campaign "c", or
// confirmed discounts of dc (order "o1" of each user).
type entryKind struct {
	name, campaign string
	apply          func(l ledger.Ledger, es ...entry) (outcome, error)
}

// outcome is what a batch of either kind did.
type outcome struct{ inserted, replayed, conflicts int }

var (
	grantKind = entryKind{name: "grant", campaign: "c", apply: func(l ledger.Ledger, es ...entry) (outcome, error) {
		gs := make([]ledger.Grant, len(es))
		for i, e := range es {
			gs[i] = g("c", e.seq, e.user, e.cents)
		}
		res, err := l.ApplyGrants(ctx, "c", gs)
		return outcome{res.Inserted, res.Replayed, len(res.Conflicts)}, err
	}}
	discountKind = entryKind{name: "discount", campaign: dc, apply: func(l ledger.Ledger, es ...entry) (outcome, error) {
		ds := make([]ledger.Discount, len(es))
		for i, e := range es {
			ds[i] = dsc(e.user, "o1", e.seq, e.cents)
		}
		res, err := l.ApplyDiscounts(ctx, dc, ds)
		return outcome{res.Inserted, res.Replayed, len(res.Conflicts)}, err
	}}
)

// write applies es, which must go in with outcome want.
func (k entryKind) write(t *testing.T, l ledger.Ledger, want outcome, es ...entry) {
	t.Helper()
	got, err := k.apply(l, es...)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// refused applies es, which must be refused for reason and write nothing
// since s.
func (k entryKind) refused(t *testing.T, l ledger.Ledger, s snapshot, reason ledger.Refusal, es ...entry) *ledger.RefusedError {
	t.Helper()
	_, err := k.apply(l, es...)
	re := s.requireRefused(t, l, err, k.name, reason)
	require.Equal(t, k.campaign, re.Campaign)
	return re
}

// testRefuseAfterRefund: once a campaign's refund is recorded its escrow
// is closed: a replay of a stored entry is still a no-op, a new one
// (alone or beside replays) is refused and writes nothing, and a
// conflict is still reported as one, not refused.
func testRefuseAfterRefund(k entryKind) func(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	return func(t *testing.T, open func(t *testing.T) ledger.Ledger) {
		l := open(t)
		fund(t, l, k.campaign, 1000)
		k.write(t, l, outcome{inserted: 1}, entry{1, "a", 300})
		require.NoError(t, l.Refund(ctx, k.campaign, 700))
		was := snap(t, l, k.campaign, ledger.EscrowAccount(k.campaign), "funding:ops", "user:a", "user:b")

		k.write(t, l, outcome{replayed: 1}, entry{1, "a", 300})
		re := k.refused(t, l, was, ledger.RefusedAfterRefund, entry{2, "b", 50})
		require.EqualValues(t, 50, re.Cents)
		k.refused(t, l, was, ledger.RefusedAfterRefund, entry{1, "a", 300}, entry{2, "b", 50})
		k.write(t, l, outcome{conflicts: 1}, entry{1, "x", 300})
		was.requireUnchanged(t, l)
	}
}

// testRefuseOverdraw: a batch that would take the escrow below zero is
// refused as a whole; what fits goes in, to exactly zero.
func testRefuseOverdraw(k entryKind) func(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	return func(t *testing.T, open func(t *testing.T) ledger.Ledger) {
		l := open(t)
		fund(t, l, k.campaign, 100)
		k.write(t, l, outcome{inserted: 1}, entry{1, "a", 60})
		was := snap(t, l, k.campaign, ledger.EscrowAccount(k.campaign), "user:a", "user:b", "user:c")

		re := k.refused(t, l, was, ledger.RefusedOverdraw, entry{2, "b", 30}, entry{3, "c", 20})
		require.EqualValues(t, 40, re.Escrow)
		require.EqualValues(t, 50, re.Cents)

		k.write(t, l, outcome{inserted: 2}, entry{2, "b", 30}, entry{3, "c", 10})
		k.refused(t, l, snap(t, l, k.campaign, ledger.EscrowAccount(k.campaign)), ledger.RefusedOverdraw, entry{4, "d", 1})
		b, err := l.Balance(ctx, ledger.EscrowAccount(k.campaign))
		require.NoError(t, err)
		require.Zero(t, b, "to exactly zero")
	}
}

// testRefuseRefund: the refund must empty the escrow exactly. One that
// would leave cents in it (grants the ledger lacks: outstanding entries)
// or take it below zero is refused and recorded nowhere, so the right one
// still goes in.
func testRefuseRefund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	apply(t, l, "c", g("c", 1, "a", 300))
	was := snap(t, l, "c", "escrow:c", "funding:ops")

	re := was.requireRefused(t, l, l.Refund(ctx, "c", 600), "refund", ledger.RefusedOutstanding)
	require.EqualValues(t, 700, re.Escrow)
	require.EqualValues(t, 600, re.Cents)
	was.requireRefused(t, l, l.Refund(ctx, "c", 0), "refund", ledger.RefusedOutstanding)
	was.requireRefused(t, l, l.Refund(ctx, "c", 701), "refund", ledger.RefusedOverdraw)

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
	was := snap(t, l, "c", "escrow:c", "user:b", "funding:ops")

	for _, stale := range []int64{0, 1} {
		sctx := ledger.WithFence(ctx, stale)
		_, err = l.ApplyGrants(sctx, "c", []ledger.Grant{g("c", 2, "b", 100)})
		require.ErrorIs(t, err, ledger.ErrFenced)
		require.NotErrorIs(t, err, ledger.ErrRefused, "a fenced batch is retried, not dead-lettered")
		require.ErrorIs(t, l.Refund(sctx, "c", 900), ledger.ErrFenced)
	}
	was.requireUnchanged(t, l)

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
