package batch

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
)

// Debit is the rule both backends apply, inside the transaction and
// under the campaign's lock, before money leaves an escrow: entry (a
// "grant" or "discount" batch) moves cents out of the escrow of campaign,
// which holds escrow cents and is refunded already or not. A batch that
// inserts nothing (every item a replay or a conflict) is never refused.
func Debit(entry, campaign string, refunded bool, escrow, cents int64, inserted int) error {
	switch {
	case inserted == 0:
		return nil
	case refunded:
		return &ledger.RefusedError{Entry: entry, Campaign: campaign, Reason: ledger.RefusedAfterRefund, Escrow: escrow, Cents: cents}
	case cents > escrow:
		return &ledger.RefusedError{Entry: entry, Campaign: campaign, Reason: ledger.RefusedOverdraw, Escrow: escrow, Cents: cents}
	}
	return nil
}

// Refund is the rule for a first refund of cents from an escrow that
// holds escrow cents: the refund must empty it exactly, so a refund while
// entries are outstanding (escrow above cents) or one that overdraws it
// is refused.
func Refund(campaign string, escrow, cents int64) error {
	switch {
	case cents > escrow:
		return &ledger.RefusedError{Entry: "refund", Campaign: campaign, Reason: ledger.RefusedOverdraw, Escrow: escrow, Cents: cents}
	case cents < escrow:
		return &ledger.RefusedError{Entry: "refund", Campaign: campaign, Reason: ledger.RefusedOutstanding, Escrow: escrow, Cents: cents}
	}
	return nil
}

// EscrowNotNegative is the name of the database's own guard (a CHECK
// constraint on PostgreSQL, a trigger on SQLite) that no escrow account
// goes below zero, whatever writes it: the backstop behind Debit and
// Refund. The backends report its violation as ErrRefused.
const EscrowNotNegative = "ledger_escrow_not_negative"

// Fenced is the fence rule: a write whose ctx carries a fence below the
// campaign's (fence, read under its lock) is ErrFenced.
func Fenced(ctx context.Context, entry, campaign string, fence int64) error {
	if f, ok := ledger.FenceFrom(ctx); ok && f < fence {
		return fmt.Errorf("%w: %s of campaign %q prepared under fence %d, the campaign's is %d",
			ledger.ErrFenced, entry, campaign, f, fence)
	}
	return nil
}
