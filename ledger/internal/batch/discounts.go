package batch

import (
	"fmt"

	"github.com/hongbao/hongbao/ledger"
)

// DiscountRow is a discount row as a database returns it, without the
// campaign.
type DiscountRow struct {
	User, Order string
	Seq, Cents  int64
}

// DiscountRowOf returns the row of a discount.
func DiscountRowOf(d ledger.Discount) DiscountRow {
	return DiscountRow{User: d.User, Order: d.Order, Seq: d.Seq, Cents: d.Cents}
}

type orderKey struct{ user, order string }

// CheckDiscounts validates a batch of one campaign and returns a copy in
// which every discount carries the campaign id.
func CheckDiscounts(campaign string, ds []ledger.Discount) ([]ledger.Discount, error) {
	return checkBatch(campaign, ds, func(d *ledger.Discount) *string { return &d.Campaign }, func(d *ledger.Discount) error {
		switch {
		case d.Campaign != campaign:
			return fmt.Errorf("%w: discount of campaign %q in a batch of campaign %q", ledger.ErrInvalid, d.Campaign, campaign)
		case d.User == "" || d.Order == "":
			return fmt.Errorf("%w: discount seq %d has no user or no order", ledger.ErrInvalid, d.Seq)
		case !IsText(d.User) || !IsText(d.Order):
			return fmt.Errorf("%w: discount seq %d: user %q or order %q is not text", ledger.ErrInvalid, d.Seq, d.User, d.Order)
		case d.Seq < 1:
			return fmt.Errorf("%w: discount seq %d", ledger.ErrInvalid, d.Seq)
		case d.Cents <= 0:
			return fmt.Errorf("%w: discount seq %d has %d cents", ledger.ErrInvalid, d.Seq, d.Cents)
		}
		return nil
	})
}

// MissingDiscounts returns the keys of the discounts the insert did not
// return, to look up for ClassifyDiscounts; nils when all were inserted.
func MissingDiscounts(ds []ledger.Discount, inserted []DiscountRow) (seqs []int64, users, orders []string) {
	if len(inserted) == len(ds) {
		return nil, nil, nil
	}
	_, others, _ := Inserted(ds, inserted, DiscountRowOf)
	for _, d := range others {
		seqs = append(seqs, d.Seq)
		users = append(users, d.User)
		orders = append(orders, d.Order)
	}
	return seqs, users, orders
}

// ClassifyDiscounts sorts each discount of the batch, in batch order, into
// inserted, replayed or conflict, as Classify does grants, and returns the
// inserted ones, whose balances the caller moves. A discount neither
// inserted nor matching a stored row is an error, never a silent skip.
func ClassifyDiscounts(ds []ledger.Discount, inserted, stored []DiscountRow) (ledger.DiscountResult, []ledger.Discount, error) {
	return classify(discountKind, ds, inserted, stored)
}

// discountKind: a discount's (user, order) is its first key, its unit
// (seq) its second.
var discountKind = kind[ledger.Discount, DiscountRow, orderKey, int64, ledger.DiscountConflict, ledger.DiscountResult]{
	row:    DiscountRowOf,
	cents:  func(d ledger.Discount) int64 { return d.Cents },
	key1:   func(r DiscountRow) orderKey { return orderKey{r.User, r.Order} },
	key2:   func(r DiscountRow) int64 { return r.Seq },
	first:  ledger.OrderDiffers,
	second: ledger.UnitTaken,
	conflict: func(d ledger.Discount, k ledger.ConflictKind, have DiscountRow) ledger.DiscountConflict {
		return ledger.DiscountConflict{Discount: d, Kind: k, Existing: discountOf(d.Campaign, have)}
	},
	extra: func(r DiscountRow) error {
		return fmt.Errorf("ledger: insert returned a row not in the batch: %q order %q", r.User, r.Order)
	},
	missing: func(d ledger.Discount) error {
		return fmt.Errorf("ledger: discount of %q order %q was neither inserted nor found", d.User, d.Order)
	},
	result: func(s sorted[ledger.Discount, ledger.DiscountConflict]) ledger.DiscountResult {
		return ledger.DiscountResult{Inserted: len(s.done), Replayed: s.replayed, InsertedCents: s.cents, Conflicts: s.conflicts}
	},
}

func discountOf(campaign string, r DiscountRow) ledger.Discount {
	return ledger.Discount{Campaign: campaign, User: r.User, Order: r.Order, Seq: r.Seq, Cents: r.Cents}
}
