package query

import (
	"context"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// Writes is a backend's part in the writes written once here (Apply,
// Fence, Do): its transaction, its read of the campaign's row at a
// batch's start (num, refunded, fenced; what it locks is the backend's),
// its debit at a batch's end, its error naming, and its identity, which
// the owner a write carries must match (Do).
type Writes[Tx any] struct {
	Tx       func(ctx context.Context, fn func(Tx) error) error
	Campaign func(ctx context.Context, tx Tx, entry, campaign string) (num int64, refunded bool, err error)
	Debit    func(ctx context.Context, tx Tx, entry, campaign string, num int64, refunded bool, n int, cents int64) error
	Wrap     func(op string, err error) error
	Identity func(ctx context.Context) (string, error)
}

// Kind is one kind of batch entry: E an entry, Res the batch's result.
type Kind[E, Res any] struct {
	op, entry string
	check     func(campaign string, es []E) ([]E, error)
	inserted  func(Res) (n int, cents int64)
}

// Grants are ApplyGrants' entries.
var Grants = Kind[ledger.Grant, ledger.ApplyResult]{
	op: "apply grants", entry: "grant", check: batch.Check,
	inserted: func(r ledger.ApplyResult) (int, int64) { return r.Inserted, r.InsertedCents },
}

// Discounts are ApplyDiscounts' entries.
var Discounts = Kind[ledger.Discount, ledger.DiscountResult]{
	op: "apply discounts", entry: "discount", check: batch.CheckDiscounts,
	inserted: func(r ledger.DiscountResult) (int, int64) { return r.Inserted, r.InsertedCents },
}

// Apply is ApplyGrants and ApplyDiscounts on either backend: it checks
// the batch (an empty one is a no-op) and its owner (Do), and then, in
// one transaction, reads the campaign's row, has write insert the entries
// and classify them (the backend's own statements), and debits what was
// inserted, the transaction's last statement.
func Apply[Tx, E, Res any](ctx context.Context, b Writes[Tx], k Kind[E, Res], campaign string, entries []E,
	write func(tx Tx, num int64, es []E) (Res, error)) (Res, error) {
	var res, none Res
	es, err := k.check(campaign, entries)
	if err != nil || len(es) == 0 {
		return none, err
	}
	err = b.Do(ctx, k.op, campaign, func(tx Tx) error {
		num, refunded, err := b.Campaign(ctx, tx, k.entry, campaign)
		if err != nil {
			return err
		}
		if res, err = write(tx, num, es); err != nil {
			return err
		}
		n, cents := k.inserted(res)
		return b.Debit(ctx, tx, k.entry, campaign, num, refunded, n, cents)
	})
	if err != nil {
		return none, err
	}
	return res, nil
}

// Fence is Fence on either backend: in one transaction, raise writes the
// campaign's new fence to fence, after whatever the backend waits for
// (the campaign's writes in flight); no campaign row is ErrNotFunded.
func Fence[Tx any](ctx context.Context, b Writes[Tx], campaign string, raise func(tx Tx, fence *int64) error) (int64, error) {
	var fence int64
	err := b.Tx(ctx, func(tx Tx) error {
		return Funded(campaign, raise(tx, &fence))
	})
	return fence, b.Wrap("fence", err)
}
