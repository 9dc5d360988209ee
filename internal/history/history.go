// Package history records what clients asked hongbao and what they were
// told, and checks it, in the style of Jepsen's set and bank checkers,
// against what Redis and the ledger hold at the end.
//
// A fault test records every call as an Op: its start and end, and
// whether it ended with an answer (OK), was refused before it could do
// anything (Fail), or ended without an answer that says what happened
// (Unknown: a 503, a timeout, a cut connection). Check then proves:
//
//   - linearizability of each user's packet, a write-once register per
//     (campaign, user), and of each order's discount, a small state
//     machine per (campaign, user, order), with porcupine; an Unknown call
//     may have taken effect at any time after it began, or never;
//   - every Unknown call is resolved by a later call with an answer on the
//     same register (a GET grants/me, a repeated reserve or confirm);
//   - set: every packet a user was told of (GRANTED or ALREADY) is that
//     user's claim in Redis and that user's grant in the ledger, no packet
//     reached two users, and nothing is held or paid that nobody was told
//     of;
//   - bank: funded = granted + refunded (+ quarantined), to the cent, and
//     every user's balance is the sum of what the ledger paid them;
//   - discounts: every discount told confirmed is in the ledger once with
//     its amount, nothing else is, and the budget, quota, per-user limits,
//     max and order amounts hold.
package history

import (
	"sort"
	"sync"
	"time"
)

// Kind is the call an Op made.
type Kind uint8

// The calls of the HTTP API a history holds.
const (
	// Grab is POST /v1/campaigns/{id}/grab.
	Grab Kind = iota + 1
	// Held is GET /v1/campaigns/{id}/grants/me.
	Held
	// Reserve is POST /v1/discounts/{id}/reserve.
	Reserve
	// Confirm is POST /v1/discounts/{id}/orders/{order}/confirm.
	Confirm
	// Cancel is POST /v1/discounts/{id}/orders/{order}/cancel.
	Cancel
)

var kindNames = [...]string{"", "grab", "held", "reserve", "confirm", "cancel"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// Result is how a call ended.
type Result uint8

const (
	// OK: an answer that says what the call did (any 200, and the
	// refusals that are part of the model: 404 no_grant or
	// no_reservation, 409 cancelled, expired or confirmed).
	OK Result = iota + 1
	// Fail: refused before it could have any effect (400, 401, 429). Check
	// leaves it out.
	Fail
	// Unknown: no answer that says what happened (503, a timeout, a cut
	// connection). The call may have taken effect, once, at any time after
	// it began, or never.
	Unknown
)

var resultNames = [...]string{"", "ok", "fail", "unknown"}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "result?"
}

// Outcomes an OK Op carries, as the HTTP API spells them, beside those of
// the API's own outcome field ("granted", "already_granted", "sold_out",
// "closed", "not_open", "reserved", "already", "limit", "exhausted",
// "confirmed", "cancelled", "expired").
const (
	// NoGrant is Held's 404 no_grant: the user holds no packet.
	NoGrant = "no_grant"
	// NoReservation is confirm's or cancel's 404 no_reservation.
	NoReservation = "no_reservation"
)

// Op is one call and its answer.
type Op struct {
	Client   int
	Kind     Kind
	Campaign string
	User     string
	// Order and OrderCents are a discount call's order (OrderCents only
	// for Reserve).
	Order      string
	OrderCents int64
	// Start and End are offsets from the recorder's start; End means
	// nothing for an Unknown call.
	Start, End time.Duration
	Result     Result
	// Outcome is the answer's outcome (see the constants); for a refusal
	// with a status other than 200, its error code.
	Outcome string
	// Packet is the packet id ("<campaign>/<seq>") an answer named, and
	// Cents its amount, or a discount's amount.
	Packet string
	Cents  int64
	// Note is free text for a report (the HTTP status, the error).
	Note string
}

// Recorder collects the Ops of a test from any number of goroutines.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the offset of this moment in the history, for an Op's Start and
// End (monotonic).
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Add records an Op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the Ops recorded so far, in start order.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Counts sums a history by result.
func Counts(ops []Op) map[Result]int {
	out := map[Result]int{}
	for _, op := range ops {
		out[op.Result]++
	}
	return out
}
