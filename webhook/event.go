package webhook

import "github.com/hongbao/hongbao/ledger"

// Event types: the "type" field of every body the sink sends. They are
// defined here once; the sink writes them and a host switches on them.
const (
	// EventFund moves a campaign's total into its escrow, once, before
	// its first grants: a FundEvent.
	EventFund = "fund"
	// EventGrants pays a batch of one campaign's grants: a GrantsEvent,
	// answered with an optional GrantsReply.
	EventGrants = "grants"
	// EventRefund returns what was left of a campaign to its funding
	// account, once, when it is settled: a RefundEvent.
	EventRefund = "refund"
	// EventTotals asks what the host holds of one campaign, for a
	// reconcile; it writes nothing: a TotalsEvent, answered with a
	// TotalsReply.
	EventTotals = "totals"
)

// FundEvent is the body of a "fund" event: the host moves TotalCents from
// its funding account Funding into the campaign's escrow, once per
// IdempotencyKey.
type FundEvent struct {
	// Type is EventFund.
	Type string `json:"type"`
	// Campaign is the campaign's id.
	Campaign string `json:"campaign"`
	// Owner is the identity the campaign recorded at create as what it
	// settles into (a Sink's Config.Name). Empty, and absent from the
	// body, for a campaign that recorded none. A host refuses an event
	// whose Owner is set and is not its own name: the money is another
	// wallet's.
	Owner string `json:"owner,omitempty"`
	// Funding names the account the campaign draws from.
	Funding string `json:"funding"`
	// TotalCents is the campaign's total, in cents.
	TotalCents int64 `json:"total_cents"`
	// Amount is TotalCents as a decimal string with two decimals
	// ("1000.00"), for hosts that keep decimals; never a float.
	Amount string `json:"amount"`
	// IdempotencyKey is "<campaign>/fund": apply it at most once.
	IdempotencyKey string `json:"idempotency_key"`
}

// GrantsEvent is the body of a "grants" event: a batch of one campaign's
// grants, in the order the settle worker read them. The same grant can
// arrive again in another batch: each is applied at most once per its own
// IdempotencyKey.
type GrantsEvent struct {
	// Type is EventGrants.
	Type string `json:"type"`
	// Campaign is the campaign's id; every grant of the batch is of it.
	Campaign string `json:"campaign"`
	// Owner is as in FundEvent.
	Owner string `json:"owner,omitempty"`
	// Grants is the batch, never empty.
	Grants []Grant `json:"grants"`
}

// Grant is one packet paid to one user: the host moves Cents from the
// campaign's escrow to the user, once per IdempotencyKey. A user holds at
// most one packet of a campaign, and a packet belongs to one user: a host
// that already holds the key, or the user, with other values answers the
// grant as a conflict (GrantsReply) rather than pay it.
type Grant struct {
	// IdempotencyKey is "<campaign>/<seq>" (GrantKey).
	IdempotencyKey string `json:"idempotency_key"`
	// Campaign is the campaign's id, the GrantsEvent's.
	Campaign string `json:"campaign"`
	// Seq is the packet's number in the campaign, from 1.
	Seq int64 `json:"seq"`
	// User is the id of the user who grabbed the packet.
	User string `json:"user"`
	// Cents is the packet's amount, at least 1.
	Cents int64 `json:"cents"`
	// Amount is Cents as a decimal string with two decimals ("7.10").
	Amount string `json:"amount"`
}

// GrantsReply is what a host may answer a "grants" event with, in a 2xx
// response, to refuse single grants: the settle worker moves those to
// the campaign's dead stream as incidents and counts the others as
// written. A 2xx body that does not start with '{' (say "OK"), or an
// object without "conflicts", means every grant was taken.
type GrantsReply struct {
	// Conflicts lists the grants refused. Keys that are not in the batch,
	// and repeats, are ignored.
	Conflicts []ConflictReply `json:"conflicts"`
}

// ConflictReply is one grant a host refuses, because it holds the packet
// or the user with other values.
type ConflictReply struct {
	// IdempotencyKey is the refused grant's key.
	IdempotencyKey string `json:"idempotency_key"`
	// Reason says why: ledger.PacketTaken (the default when empty) or
	// ledger.UserHasOther.
	Reason ledger.ConflictKind `json:"reason,omitempty"`
	// Existing, if the host gives it, is what it holds instead.
	Existing *ExistingGrant `json:"existing,omitempty"`
}

// ExistingGrant is the grant a host holds in place of one it refuses.
type ExistingGrant struct {
	// Seq is the packet it holds.
	Seq int64 `json:"seq"`
	// User is the user who holds it.
	User string `json:"user"`
	// Cents is its amount.
	Cents int64 `json:"cents"`
}

// RefundEvent is the body of a "refund" event: the host moves Cents from
// the campaign's escrow back to its funding account, once per
// IdempotencyKey. Cents may be 0: the event then records that the
// campaign is settled, and the escrow should be empty.
type RefundEvent struct {
	// Type is EventRefund.
	Type string `json:"type"`
	// Campaign is the campaign's id.
	Campaign string `json:"campaign"`
	// Owner is as in FundEvent.
	Owner string `json:"owner,omitempty"`
	// Cents is what was not granted, in cents.
	Cents int64 `json:"cents"`
	// Amount is Cents as a decimal string with two decimals.
	Amount string `json:"amount"`
	// IdempotencyKey is "<campaign>/refund": apply it at most once.
	IdempotencyKey string `json:"idempotency_key"`
}

// TotalsEvent is the body of a "totals" event: a question, which the host
// answers with a TotalsReply and which changes nothing. Its
// Idempotency-Key header is new on every call ("<campaign>/totals/<nonce>"):
// answer each with the wallet's current totals, never a cached reply.
type TotalsEvent struct {
	// Type is EventTotals.
	Type string `json:"type"`
	// Campaign is the id of the campaign asked about.
	Campaign string `json:"campaign"`
	// Owner is as in FundEvent: a host answers a foreign campaign's
	// question with a refusal, as it would its money.
	Owner string `json:"owner,omitempty"`
}

// TotalsReply is the JSON a host answers a "totals" event with, in a 2xx
// response: what its wallet holds of the campaign, counting each
// idempotency key once. A campaign the host never heard of is all zeros,
// with Campaign still set. Every amount is integer cents, never negative.
type TotalsReply struct {
	// Campaign is the campaign asked about, echoed: a reply without it
	// (say from a host that answers "OK" to events it does not know) is
	// refused as malformed, so it is never read as "holds nothing".
	Campaign string `json:"campaign"`
	// Funding is the funding account of the fund event held, if any.
	Funding string `json:"funding,omitempty"`
	// FundedCents is the total of the fund event held (0 if none).
	FundedCents int64 `json:"funded_cents"`
	// GrantCount counts the grants held, one per idempotency key.
	GrantCount int64 `json:"grant_count"`
	// GrantCents sums their cents.
	GrantCents int64 `json:"grant_cents"`
	// RefundedCents is the cents of the refund event held (0 if none).
	RefundedCents int64 `json:"refunded_cents"`
	// Refunded says whether a refund event is held, even one of 0 cents.
	Refunded bool `json:"refunded"`
}
