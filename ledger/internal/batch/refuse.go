package batch

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
)

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

// CheckFund validates a fund entry.
func CheckFund(c ledger.Campaign) error {
	if c.ID == "" || c.Funding == "" || c.Total < 0 {
		return fmt.Errorf("%w: fund campaign %q from %q with %d cents", ledger.ErrInvalid, c.ID, c.Funding, c.Total)
	}
	return nil
}

// CheckRefund validates a refund entry.
func CheckRefund(campaign string, cents int64) error {
	if campaign == "" || cents < 0 {
		return fmt.Errorf("%w: refund %d cents of campaign %q", ledger.ErrInvalid, cents, campaign)
	}
	return nil
}

// EscrowNotNegative is the name of the database's own guard (a CHECK
// constraint on PostgreSQL, a trigger on SQLite) that no escrow account
// goes below zero, whatever writes it: the backstop behind the backends'
// own checks (a batch's conditional debit of the escrow, Refund). The
// backends report its violation as ErrRefused.
const EscrowNotNegative = "ledger_escrow_not_negative"

// Fenced is the fence rule: a write whose ctx carries a fence below the
// campaign's (fence, read from the campaign's row under a lock that
// Fence's update waits for) is ErrFenced.
func Fenced(ctx context.Context, entry, campaign string, fence int64) error {
	if f, ok := ledger.FenceFrom(ctx); ok && f < fence {
		return fmt.Errorf("%w: %s of campaign %q prepared under fence %d, the campaign's is %d",
			ledger.ErrFenced, entry, campaign, f, fence)
	}
	return nil
}

// Foreign is the owner rule: a write of campaign whose ctx carries an
// owner (ledger.WithOwner) that is not the ledger's identity is a
// *ledger.ForeignError. identity reads the ledger's (an error reading it
// is returned: the write cannot be checked, so it must not go on); it is
// called only when ctx carries an owner, so writes without one, such as
// those of campaigns created before owners were recorded, cost nothing.
func Foreign(ctx context.Context, campaign string, identity func(context.Context) (string, error)) error {
	owner, ok := ledger.OwnerFrom(ctx)
	if !ok {
		return nil
	}
	id, err := identity(ctx)
	if err != nil {
		return err
	}
	if owner != id {
		return &ledger.ForeignError{Campaign: campaign, Owner: owner, Ledger: id}
	}
	return nil
}
