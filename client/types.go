package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// CampaignSpec is a red packet campaign to create. Money is in cents.
type CampaignSpec struct {
	TotalCents     int64     `json:"total_cents"`
	Count          int       `json:"count"`
	Split          string    `json:"split,omitempty"`     // "double-average" (default), "line-cut" or "fixed"
	MinCents       int64     `json:"min_cents,omitempty"` // default 1
	MaxCents       int64     `json:"max_cents,omitempty"` // default: none
	OpensAt        time.Time `json:"opens_at,omitzero"`   // default: now
	ClosesAt       time.Time `json:"closes_at,omitzero"`  // default: 24 h after opening
	FundingAccount string    `json:"funding_account,omitempty"`
	Seed           *uint64   `json:"seed,omitempty"`   // reproduces the split; default random
	Shards         int       `json:"shards,omitempty"` // default 1
	// IdempotencyKey names the create: a retry with the same key and spec
	// answers the same campaign. Empty: the call draws one, so its own
	// retries are safe (a new call is a new campaign).
	IdempotencyKey string `json:"-"`
}

// Campaign is a red packet campaign as created.
type Campaign struct {
	ID             string    `json:"id"`
	State          string    `json:"state"` // scheduled, open, closed, settled
	OpensAt        time.Time `json:"opens_at"`
	ClosesAt       time.Time `json:"closes_at"`
	TotalCents     int64     `json:"total_cents"`
	Count          int       `json:"count"`
	Split          string    `json:"split"`
	MinCents       int64     `json:"min_cents"`
	MaxCents       int64     `json:"max_cents"` // 0: unbounded
	FundingAccount string    `json:"funding_account"`
	// Owner is the identity of the ledger or webhook wallet the campaign
	// settles into; "" when it records none.
	Owner  string `json:"owner,omitempty"`
	Seed   uint64 `json:"seed,string"`
	Shards int    `json:"shards"`
}

// CampaignStatus is a campaign and where its money is.
type CampaignStatus struct {
	Campaign
	CloseReason    string     `json:"close_reason"` // sold_out, time, operator, cancelled; "" while not closed
	GrantedCount   int        `json:"granted_count"`
	GrantedCents   int64      `json:"granted_cents"`
	RemainingCount int        `json:"remaining_count"`
	RemainingCents int64      `json:"remaining_cents"`
	RefundedCents  int64      `json:"refunded_cents"`
	Settlement     Settlement `json:"settlement"`
	Now            time.Time  `json:"now"`           // the Redis clock at the read
	InFlight       int        `json:"in_flight"`     // packets moving between shards (in RemainingCount)
	Paused         bool       `json:"paused"`        // an operator paused it (PauseCampaign)
	PausedShards   int        `json:"paused_shards"` // all shards once a pause answered, 0 once a resume did
	// Overtaken, on the answer of PauseCampaign or ResumeCampaign only:
	// one that started later wrote a shard first, and the campaign is as
	// that one wants (Paused), not as this call asked.
	Overtaken    bool `json:"overtaken"`
	BlockedUsers int  `json:"blocked_users"`
}

// Settlement is the campaign's grants on their way to the ledger.
type Settlement struct {
	LagEntries     int `json:"lag_entries"`     // not yet delivered to a settlement worker
	PendingEntries int `json:"pending_entries"` // delivered, not yet in the ledger
	DeadEntries    int `json:"dead_entries"`    // failed settlement, waiting for an operator
}

// CampaignList is a page of the registered campaigns (created, not yet
// settled), by close time, the earliest first.
type CampaignList struct {
	Campaigns []CampaignStatus `json:"campaigns"`
	Total     int              `json:"total"` // how many are registered
	More      bool             `json:"more"`  // campaigns follow this page
}

// The outcomes of a grab.
const (
	Granted        = "granted"
	AlreadyGranted = "already_granted" // the user's packet, granted before (or by a retry's first attempt)
	SoldOut        = "sold_out"
	NotOpen        = "not_open"
	Closed         = "closed"
	Paused         = "paused"  // an operator paused the campaign (also a reserve's answer)
	Blocked        = "blocked" // an operator blocked the user on the campaign (also a reserve's answer)
)

// Grab is the answer to a grab.
type Grab struct {
	Campaign    string `json:"campaign"`
	Outcome     string `json:"outcome"`
	PacketID    string `json:"packet_id"`    // "<campaign>/<seq>" with Granted and AlreadyGranted
	AmountCents int64  `json:"amount_cents"` // with Granted and AlreadyGranted
}

// Holds says whether the user holds a packet: Granted or AlreadyGranted.
// After a retried grab the first attempt's grant answers AlreadyGranted.
func (g *Grab) Holds() bool { return g.Outcome == Granted || g.Outcome == AlreadyGranted }

// Packet is the packet a user holds.
type Packet struct {
	Campaign    string `json:"campaign"`
	PacketID    string `json:"packet_id"`
	AmountCents int64  `json:"amount_cents"`
}

// Redrive is the answer to a redrive.
type Redrive struct {
	Campaign        string `json:"campaign"`
	RedrivenEntries int    `json:"redriven_entries"`
}

// Duration is a time.Duration that crosses JSON as Go writes it ("5m0s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// DiscountSpec is a discount campaign to create: Budget cents spent over
// Quota discounts. Money is in cents.
type DiscountSpec struct {
	BudgetCents        int64     `json:"budget_cents"`
	Quota              int       `json:"quota"`
	MinCents           int64     `json:"min_cents,omitempty"`             // default 1
	MaxCents           int64     `json:"max_cents,omitempty"`             // default: the budget
	PerUserCount       int       `json:"per_user_count,omitempty"`        // default 1 unless another limit is given
	PerUserAmountCents int64     `json:"per_user_amount_cents,omitempty"` // default: no amount limit
	PerUserUnlimited   bool      `json:"per_user_unlimited,omitempty"`
	Shards             int       `json:"shards,omitempty"`
	Hold               Duration  `json:"hold,omitzero"` // how long a reservation waits for its confirm; default 5m
	OpensAt            time.Time `json:"opens_at,omitzero"`
	ClosesAt           time.Time `json:"closes_at,omitzero"`
	FundingAccount     string    `json:"funding_account,omitempty"`
	Seed               *uint64   `json:"seed,omitempty"`
	// IdempotencyKey: as CampaignSpec's.
	IdempotencyKey string `json:"-"`
}

// Discount is a discount campaign as created.
type Discount struct {
	ID                 string    `json:"id"`
	State              string    `json:"state"`
	OpensAt            time.Time `json:"opens_at"`
	ClosesAt           time.Time `json:"closes_at"`
	BudgetCents        int64     `json:"budget_cents"`
	Quota              int       `json:"quota"`
	MinCents           int64     `json:"min_cents"`
	MaxCents           int64     `json:"max_cents"`
	PerUserCount       int       `json:"per_user_count"` // 0: no limit
	PerUserAmountCents int64     `json:"per_user_amount_cents"`
	PerUserUnlimited   bool      `json:"per_user_unlimited"`
	Shards             int       `json:"shards"`
	Hold               Duration  `json:"hold"`
	FundingAccount     string    `json:"funding_account"`
	Owner              string    `json:"owner,omitempty"` // the ledger or wallet it settles into
	Seed               uint64    `json:"seed,string"`
	TailCount          int       `json:"tail_count"`
}

// DiscountStatus is a discount campaign and where its budget is: always
// confirmed + reserved + remaining = budget (cents) and = quota (count).
type DiscountStatus struct {
	Discount
	CloseReason       string    `json:"close_reason"` // time, operator, exhausted, cancelled
	ConfirmedCount    int       `json:"confirmed_count"`
	ConfirmedCents    int64     `json:"confirmed_cents"`
	ReservedCount     int       `json:"reserved_count"`
	ReservedCents     int64     `json:"reserved_cents"`
	RemainingCount    int       `json:"remaining_count"`
	RemainingCents    int64     `json:"remaining_cents"`
	CompensationCents int64     `json:"compensation_cents"`
	RefundedCents     int64     `json:"refunded_cents"`
	InFlight          int       `json:"in_flight"`
	Paused            bool      `json:"paused"`
	PausedShards      int       `json:"paused_shards"`
	Overtaken         bool      `json:"overtaken"` // as in CampaignStatus (PauseDiscount, ResumeDiscount)
	BlockedUsers      int       `json:"blocked_users"`
	Now               time.Time `json:"now"`
}

// DiscountList is a page of the registered discount campaigns, as
// CampaignList.
type DiscountList struct {
	Discounts []DiscountStatus `json:"discounts"`
	Total     int              `json:"total"`
	More      bool             `json:"more"`
}

// Order is a reserve: the user who pays, the payment's order id and its
// amount in cents (no discount exceeds it).
type Order struct {
	UserID           string `json:"user_id"`
	OrderID          string `json:"order_id"`
	OrderAmountCents int64  `json:"order_amount_cents"`
}

// OrderRef names the reservation a confirm or a cancel ends: the user's
// order.
type OrderRef struct {
	UserID  string
	OrderID string
}

// The outcomes of a reserve, a confirm and a cancel.
const (
	Reserved  = "reserved"
	Already   = "already" // this order's discount again, the same amount
	Exhausted = "exhausted"
	Limit     = "limit"
	// NotOpen and Closed as for a grab.
	Confirmed = "confirmed"
	Cancelled = "cancelled"
	Expired   = "expired"
)

// Reservation is the answer to a reserve.
type Reservation struct {
	Outcome     string    `json:"outcome"`
	OrderID     string    `json:"order_id"`
	AmountCents int64     `json:"amount_cents"` // with Reserved and Already
	ExpiresAt   time.Time `json:"expires_at"`   // with Reserved and Already
}

// Holds says whether the order holds a discount: Reserved or Already.
// After a retried reserve the first attempt's reservation answers Already.
func (r *Reservation) Holds() bool { return r.Outcome == Reserved || r.Outcome == Already }

// OrderOutcome is the answer to a confirm or a cancel.
type OrderOutcome struct {
	Outcome     string `json:"outcome"` // Confirmed, Cancelled or Expired
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}
