package httpapi

import (
	"strconv"

	"github.com/hongbao/hongbao"
)

// The JSON answers of the discount routes. Amounts come in both forms, a
// decimal string and integer cents.

type discountOut struct {
	ID                 string `json:"id"`
	State              string `json:"state"`
	OpensAt            string `json:"opens_at"`
	ClosesAt           string `json:"closes_at"`
	Budget             string `json:"budget"`
	BudgetCents        int64  `json:"budget_cents"`
	Quota              int    `json:"quota"`
	Min                string `json:"min"`
	MinCents           int64  `json:"min_cents"`
	Max                string `json:"max"`
	MaxCents           int64  `json:"max_cents"`
	PerUserCount       int    `json:"per_user_count,omitempty"`
	PerUserAmount      string `json:"per_user_amount,omitempty"`
	PerUserAmountCents int64  `json:"per_user_amount_cents,omitempty"`
	// PerUserUnlimited is true when a user may take any number of
	// discounts, of any total.
	PerUserUnlimited bool   `json:"per_user_unlimited,omitempty"`
	Shards           int    `json:"shards"`
	Hold             string `json:"hold"`
	FundingAccount   string `json:"funding_account"`
	Owner            string `json:"owner,omitempty"` // the ledger or wallet it settles into
	// Seed is a decimal string (a uint64 does not survive a JavaScript
	// number); only admins see campaigns.
	Seed      string `json:"seed"`
	TailCount int    `json:"tail_count"`
}

func discountJSON(d *hongbao.Discount) discountOut {
	f := hongbao.FormatCents
	out := discountOut{
		ID: d.ID, State: string(d.State), OpensAt: rfc3339(d.OpensAt), ClosesAt: rfc3339(d.ClosesAt),
		Budget: f(d.Budget), BudgetCents: d.Budget, Quota: d.Quota, Min: f(d.Min), MinCents: d.Min,
		Max: f(d.Max), MaxCents: d.Max, PerUserCount: d.PerUserCount, Shards: d.Shards,
		Hold: d.Hold.String(), FundingAccount: d.Funding, Owner: d.Owner, Seed: strconv.FormatUint(d.Seed, 10), TailCount: d.TailCount,
	}
	if d.PerUserAmount > 0 {
		out.PerUserAmount, out.PerUserAmountCents = f(d.PerUserAmount), d.PerUserAmount
	}
	out.PerUserUnlimited = d.PerUserCount == 0 && d.PerUserAmount == 0
	return out
}

// discountStatusOut is GET /v1/discounts/{id}: the campaign and its
// counters, with confirmed + reserved + remaining = budget and quota.
type discountStatusOut struct {
	discountOut
	CloseReason       string `json:"close_reason,omitempty"`
	ConfirmedCount    int64  `json:"confirmed_count"`
	Confirmed         string `json:"confirmed"`
	ConfirmedCents    int64  `json:"confirmed_cents"`
	ReservedCount     int64  `json:"reserved_count"`
	Reserved          string `json:"reserved"`
	ReservedCents     int64  `json:"reserved_cents"`
	RemainingCount    int64  `json:"remaining_count"`
	Remaining         string `json:"remaining"`
	RemainingCents    int64  `json:"remaining_cents"`
	CompensationCents int64  `json:"compensation_cents"`
	RefundedCents     int64  `json:"refunded_cents"`
	InFlight          int64  `json:"in_flight"`
	Paused            bool   `json:"paused"`
	PausedShards      int    `json:"paused_shards"`
	Overtaken         bool   `json:"overtaken,omitempty"`
	BlockedUsers      int64  `json:"blocked_users"`
	Now               string `json:"now"`
}

func discountStatusJSON(st *hongbao.DiscountStatus) discountStatusOut {
	f := hongbao.FormatCents
	return discountStatusOut{
		discountOut: discountJSON(&st.Discount), CloseReason: st.CloseReason,
		ConfirmedCount: st.ConfirmedCount, Confirmed: f(st.ConfirmedCents), ConfirmedCents: st.ConfirmedCents,
		ReservedCount: st.ReservedCount, Reserved: f(st.ReservedCents), ReservedCents: st.ReservedCents,
		RemainingCount: st.RemainingCount, Remaining: f(st.RemainingCents), RemainingCents: st.RemainingCents,
		CompensationCents: st.CompensationCents, RefundedCents: st.RefundedCents, InFlight: st.InFlight,
		Paused: st.Paused, PausedShards: st.PausedShards, Overtaken: st.Overtaken, BlockedUsers: st.BlockedUsers,
		Now: rfc3339(st.Now),
	}
}

// orderOut answers reserve, confirm and cancel.
type orderOut struct {
	Outcome     string `json:"outcome"`
	OrderID     string `json:"order_id"`
	Amount      string `json:"amount,omitempty"`
	AmountCents int64  `json:"amount_cents,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
}

// reserveJSON is the answer to a reserve: the amount and the end of the
// hold when the outcome carries a discount.
func reserveJSON(r hongbao.Reservation) orderOut {
	out := orderOut{Outcome: r.Outcome.String(), OrderID: r.Order}
	if r.Outcome.HasAmount() {
		out.Amount, out.AmountCents = hongbao.FormatCents(r.Cents), r.Cents
		out.ExpiresAt = rfc3339(r.ExpiresAt)
	}
	return out
}

// confirmJSON answers a confirm, the same when repeated.
func confirmJSON(r hongbao.Reservation) orderOut {
	return orderOut{Outcome: "confirmed", OrderID: r.Order, Amount: hongbao.FormatCents(r.Cents), AmountCents: r.Cents}
}

// cancelJSON answers a cancel: cancelled (also when repeated), or expired
// when the hold had ended first; the amount went back either way.
func cancelJSON(r hongbao.Reservation) orderOut {
	outcome := "cancelled"
	if r.State == hongbao.Expired {
		outcome = "expired"
	}
	return orderOut{Outcome: outcome, OrderID: r.Order}
}
