package hongbao

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/split"
)

// Discount campaigns: random instant discounts at payment time. A
// campaign spends a budget over a quota of discounts, drawn ahead of time
// (split.Discounts) and dealt to the campaign's shards; a user may get at
// most PerUserCount discounts and at most PerUserAmount in total. A
// payment system reserves a discount for an order (Discounts.Reserve), holds
// it while the payment runs, and confirms it (Discounts.Confirm) or cancels
// it (Discounts.Cancel); a reservation neither confirmed nor cancelled
// expires after its hold and a reaper returns its amount (Discounts.Reap).
//
// Every decision is one Lua script on the user's home shard (HomeShard),
// which holds the user's usage, its reservations and the amounts it is
// served from: no multi-script window, nothing to roll back after a
// crash. See docs/discounts.md for the design and why its invariants hold:
//
//   - confirmed + reserved + remaining = the budget, to the cent, and = the
//     quota, to the unit, at every moment (remaining counts what is in the
//     pools, in compensation and in transfers between shards, and after
//     settlement what was refunded);
//   - no user ever holds more than PerUserCount discounts or more than
//     PerUserAmount, confirmed and reserved together;
//   - no discount exceeds its order amount or Max;
//   - every call is idempotent by (user, order id).

// Defaults and bounds of a discount campaign.
const (
	// DefaultHold is how long a reservation is held when the spec gives
	// no Hold.
	DefaultHold = 5 * time.Minute
	// MinHold and MaxHold bound a spec's Hold.
	MinHold = time.Second
	MaxHold = 24 * time.Hour
)

// DiscountSpec describes a discount campaign to create. Amounts are
// integer cents.
type DiscountSpec struct {
	// ID names the campaign: 1 to 64 of A-Z a-z 0-9 _ -. Empty: a random
	// id. Discount campaigns have ids of their own, apart from red packet
	// campaigns.
	ID string
	// Budget is the amount to spend, exactly (at most split.MaxTotal).
	Budget int64
	// Quota is the number of discounts.
	Quota int
	// Min is the smallest discount drawn; 0 means 1 cent. A discount may
	// still come out below it, clipped to a user's amount limit or to an
	// order amount.
	Min int64
	// Max is the largest discount; 0 means the budget. No discount ever
	// exceeds it, compensation included.
	Max int64
	// PerUserCount is the most discounts one user may hold, confirmed or
	// reserved; 0 means no limit.
	PerUserCount int
	// PerUserAmount is the most cents one user may hold, confirmed or
	// reserved; 0 means no limit. At least Min when set.
	PerUserAmount int64
	// Shards spreads the campaign over this many hash tags, as for Spec;
	// 1 to MaxShards, at most Quota; 0 means 1.
	Shards int
	// Hold is how long a reservation waits for its confirm before it
	// expires and its amount returns: within [MinHold, MaxHold], whole
	// milliseconds; 0 means DefaultHold.
	Hold time.Duration
	// OpensAt is when reservations start; zero means at once (Redis clock).
	OpensAt time.Time
	// ClosesAt is when reservations end; zero means OpensAt +
	// DefaultWindow. Confirms of reservations made before it are accepted
	// until their hold ends.
	ClosesAt time.Time
	// Funding is the account the budget comes from; empty means
	// DefaultFunding.
	Funding string
	// Seed reproduces the amounts; nil means a fresh one. An operator
	// secret, as Spec.Seed.
	Seed *uint64
}

// Validate checks spec without touching Redis. A refused field is a
// *SpecError (Field as the HTTP API spells it: "budget", "quota", "min",
// "max", "per_user_count", "per_user_amount", "shards", "hold",
// "opens_at", "closes_at"), a refused id an *IDError.
func (spec DiscountSpec) Validate() error {
	_, err := spec.check()
	return err
}

// check is Validate, returning the amounts' spec with its defaults.
func (spec DiscountSpec) check() (split.DiscountSpec, error) {
	if err := spec.checkIDs(); err != nil {
		return split.DiscountSpec{}, err
	}
	sp, err := split.DiscountSpec{Budget: spec.Budget, Quota: spec.Quota, Min: spec.Min, Max: spec.Max}.Normalize()
	if err != nil {
		return split.DiscountSpec{}, fromSplit(err)
	}
	bad := func(field, format string, a ...any) (split.DiscountSpec, error) {
		return split.DiscountSpec{}, &SpecError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case spec.PerUserCount < 0:
		return bad("per_user_count", "must not be negative, got %d", spec.PerUserCount)
	case spec.PerUserAmount < 0:
		return bad("per_user_amount", "must not be negative, got %d cents", spec.PerUserAmount)
	case spec.PerUserAmount > 0 && spec.PerUserAmount < sp.Min:
		return bad("per_user_amount", "%s is below min %s: a user could not get a single discount",
			FormatCents(spec.PerUserAmount), FormatCents(sp.Min))
	case spec.Hold != 0 && (spec.Hold < MinHold || spec.Hold > MaxHold):
		return bad("hold", "must be within %s and %s, got %s", MinHold, MaxHold, spec.Hold)
	case spec.Hold%time.Millisecond != 0:
		return bad("hold", "must be whole milliseconds, got %s", spec.Hold)
	case spec.Shards < 0 || spec.Shards > MaxShards:
		return bad("shards", "must be within 1..%d, got %d", MaxShards, spec.Shards)
	case spec.Shards > sp.Quota:
		return bad("shards", "%d shards need a quota of at least as many, got %d", spec.Shards, sp.Quota)
	}
	return sp, nil
}

// checkIDs checks the ids and the open window of spec.
func (spec DiscountSpec) checkIDs() error {
	if spec.ID != "" {
		if err := ValidateCampaignID(spec.ID); err != nil {
			return err
		}
	}
	if spec.Funding != "" {
		if err := ValidateAccountID(spec.Funding); err != nil {
			return err
		}
	}
	if !spec.OpensAt.IsZero() && !spec.ClosesAt.IsZero() && unixMs(spec.ClosesAt) <= unixMs(spec.OpensAt) {
		return &SpecError{Field: "closes_at", Reason: fmt.Sprintf("%s is not after opens_at %s",
			spec.ClosesAt.Format(time.RFC3339Nano), spec.OpensAt.Format(time.RFC3339Nano))}
	}
	return nil
}

// ValidateOrderID checks an order id: 1 to 64 of A-Z a-z 0-9 _ . : -.
func ValidateOrderID(id string) error { return validID("order", id, "_.:-") }

// Discount is a created discount campaign.
type Discount struct {
	ID            string
	State         State
	Budget        int64 // cents
	Quota         int
	Min, Max      int64 // cents
	PerUserCount  int   // 0: no limit
	PerUserAmount int64 // cents; 0: no limit
	Shards        int
	Hold          time.Duration
	OpensAt       time.Time
	ClosesAt      time.Time
	Funding       string
	Seed          uint64
	// TailCount is the number of Min amounts served last on the shards
	// (list 2 of split.Discounts).
	TailCount int
	// Owner is the identity of the ledger or sink the campaign settles
	// into (Config.Owner), "" when it records none.
	Owner string
}

// CloseExhausted is the close reason of a discount campaign whose every
// discount is confirmed: nothing is left to reserve and nothing can come
// back.
const CloseExhausted = "exhausted"

// DiscountStatus is a discount campaign and its counters. Every shard is
// read consistently; the shards one after another in one round trip.
type DiscountStatus struct {
	Discount
	// CloseReason says why it closed (CloseTime, CloseOperator,
	// CloseExhausted, CloseCancelled), when it did.
	CloseReason string
	// ConfirmedCount and ConfirmedCents are the discounts confirmed.
	ConfirmedCount, ConfirmedCents int64
	// ReservedCount and ReservedCents are the reservations held (those
	// past their hold count until the reaper returns them).
	ReservedCount, ReservedCents int64
	// RemainingCount and RemainingCents are what is left of the quota and
	// the budget: in the pools, in compensation (cents only) and in
	// transfers between shards; after settlement, what was refunded.
	// Confirmed + reserved + remaining = the budget and the quota.
	RemainingCount, RemainingCents int64
	// CompensationCents is the part of RemainingCents set aside by
	// clipping, waiting to top up later discounts.
	CompensationCents int64
	// RefundedCents went back to the funding account at settlement.
	RefundedCents int64
	// InFlight counts the units (of RemainingCount) moving between shards.
	InFlight int64
	// Paused, PausedShards, Overtaken and BlockedUsers are as in Status
	// (Discounts.Pause, Discounts.Block).
	Paused       bool
	PausedShards int
	Overtaken    bool
	BlockedUsers int64
	// Now is the Redis clock at the read of the root.
	Now time.Time
}

// ReserveOutcome is the answer to a reservation.
type ReserveOutcome uint8

// The outcomes of Discounts.Reserve. Their values are the codes
// disc_reserve.lua returns (internal/redisstore/lua/lib/outcomes.lua);
// outcomeTable (outcome.go) names each one's API word and metric label.
const (
	// Reserved: this call reserved a discount for the order.
	Reserved ReserveOutcome = 1
	// ReservedAlready: the order holds a discount (reserved, or
	// confirmed); it is the one returned. Retries answer this.
	ReservedAlready ReserveOutcome = 2
	// Exhausted: nothing is left to reserve on any shard (a cancel or an
	// expiry may bring a unit back later).
	Exhausted ReserveOutcome = 3
	// ReserveNotOpen: the campaign has not opened yet.
	ReserveNotOpen ReserveOutcome = 4
	// ReserveClosed: the campaign's window ended or it was closed.
	ReserveClosed ReserveOutcome = 5
	// OverLimit: the user holds PerUserCount discounts or PerUserAmount.
	OverLimit ReserveOutcome = 8
	// ReservePaused: an operator paused the campaign (Discounts.Pause).
	ReservePaused ReserveOutcome = 14
	// ReserveBlocked: an operator blocked the user on this campaign
	// (Discounts.Block).
	ReserveBlocked ReserveOutcome = 15
)

// HasAmount reports whether the answer carries a discount.
func (o ReserveOutcome) HasAmount() bool { return o == Reserved || o == ReservedAlready }

// ReservationState is where an order's discount stands.
type ReservationState uint8

// The states of a reservation.
const (
	// Held: reserved, waiting for its confirm until ExpiresAt.
	Held ReservationState = 1
	// Confirmed: final; it settles into the ledger.
	Confirmed ReservationState = 2
	// Cancelled: released by a cancel; its amount went back.
	Cancelled ReservationState = 3
	// Expired: released because its hold ended; its amount went back.
	Expired ReservationState = 4
)

var stateNames = [...]string{"", "held", "confirmed", "cancelled", "expired"}

// String is the state in words: "held", "confirmed", "cancelled" or
// "expired".
func (s ReservationState) String() string {
	if int(s) < len(stateNames) && s != 0 {
		return stateNames[s]
	}
	return "ReservationState(" + strconv.Itoa(int(s)) + ")"
}

// Reservation is the answer about one order's discount.
type Reservation struct {
	Campaign, User, Order string
	// Outcome is Reserve's answer; 0 from Confirm and Cancel.
	Outcome ReserveOutcome
	// State is what the order's discount is after the call; 0 when the
	// outcome carries none.
	State ReservationState
	// Again is true when the call found the order so already (a repeated
	// confirm or cancel; a repeated reserve says ReservedAlready).
	Again bool
	// Seq is the unit of quota the discount holds (1..Quota).
	Seq int64
	// Cents is the discount.
	Cents int64
	// ExpiresAt is when the hold ends (for a held reservation).
	ExpiresAt time.Time
}
