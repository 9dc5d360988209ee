package hongbao

import (
	"slices"
	"strconv"
)

// OutcomeRow is one outcome a grab or a reservation answers: everything
// that names it, in one place. The API words, the metric labels, the
// console's live counts and the metrics registered ahead of time are
// derived from these rows; the Lua codes come from the scripts' library
// file internal/redisstore/lua/lib/outcomes.lua, and tests hold it, the
// API contract (openapi.json), the client package, the console and play
// pages, the dashboard and the docs to these rows.
type OutcomeRow struct {
	// Call is the call that answers it.
	Call OutcomeCall
	// Code is the code the script answers it with, and the value of its
	// Go constant (Outcome or ReserveOutcome).
	Code uint8
	// Lua is the code's name in lib/outcomes.lua.
	Lua string
	// Const is the Go constant's name in this package.
	Const string
	// Word is the outcome as the API spells it: String's answer, the
	// "outcome" of the JSON answer and the client package's constant.
	Word string
	// Label is its label on the call's metric (hongbao_grabs_total,
	// hongbao_discount_reserves_total) and, for a grab, its key in the
	// console's live counts.
	Label string
}

// OutcomeCall names a call that answers outcomes.
type OutcomeCall string

// The calls of OutcomeTable.
const (
	CallGrab    OutcomeCall = "grab"    // Engine.Grab: an Outcome
	CallReserve OutcomeCall = "reserve" // Discounts.Reserve: a ReserveOutcome
)

// outcomeTable is every outcome of a grab and of a reservation, each kind
// in the order the console and the docs list them. A new outcome is a row
// here, its constant, its code in lib/outcomes.lua and the script that
// answers it; the tests name every other place that must learn its word.
var outcomeTable = []OutcomeRow{
	{CallGrab, uint8(Granted), "OK", "Granted", "granted", "granted"},
	{CallGrab, uint8(Already), "ALREADY", "Already", "already_granted", "already_granted"},
	{CallGrab, uint8(SoldOut), "RAN_OUT", "SoldOut", "sold_out", "sold_out"},
	{CallGrab, uint8(NotOpen), "NOT_OPEN", "NotOpen", "not_open", "not_open"},
	{CallGrab, uint8(Closed), "CLOSED", "Closed", "closed", "closed"},
	{CallGrab, uint8(Paused), "PAUSED", "Paused", "paused", "paused"},
	{CallGrab, uint8(Blocked), "BLOCKED", "Blocked", "blocked", "blocked"},

	{CallReserve, uint8(Reserved), "OK", "Reserved", "reserved", "reserved"},
	{CallReserve, uint8(ReservedAlready), "ALREADY", "ReservedAlready", "already", "already"},
	{CallReserve, uint8(Exhausted), "RAN_OUT", "Exhausted", "exhausted", "exhausted"},
	{CallReserve, uint8(OverLimit), "LIMIT", "OverLimit", "limit", "limit"},
	{CallReserve, uint8(ReserveNotOpen), "NOT_OPEN", "ReserveNotOpen", "not_open", "not_open"},
	{CallReserve, uint8(ReserveClosed), "CLOSED", "ReserveClosed", "closed", "closed"},
	{CallReserve, uint8(ReservePaused), "PAUSED", "ReservePaused", "paused", "paused"},
	{CallReserve, uint8(ReserveBlocked), "BLOCKED", "ReserveBlocked", "blocked", "blocked"},
}

// OutcomeTable returns the rows of every outcome of a grab and of a
// reservation (a copy).
func OutcomeTable() []OutcomeRow { return slices.Clone(outcomeTable) }

// MaxOutcomeCode bounds the codes of OutcomeTable: every Code is below
// it, so an array of this length indexed by an Outcome or a
// ReserveOutcome holds every outcome (the metrics and the live counts
// keep their per-outcome counters so, allocation-free).
const MaxOutcomeCode = 16

// GrabOutcomes returns the outcomes of a grab, in the table's order.
func GrabOutcomes() []Outcome {
	var out []Outcome
	for _, r := range outcomeTable {
		if r.Call == CallGrab {
			out = append(out, Outcome(r.Code))
		}
	}
	return out
}

// ReserveOutcomes returns the outcomes of a reservation, in the table's
// order.
func ReserveOutcomes() []ReserveOutcome {
	var out []ReserveOutcome
	for _, r := range outcomeTable {
		if r.Call == CallReserve {
			out = append(out, ReserveOutcome(r.Code))
		}
	}
	return out
}

// The words and labels by code, built from outcomeTable once: String is
// on the grab's hot path.
var (
	grabWords, grabLabels, reserveWords, reserveLabels = outcomeIndex()
)

func outcomeIndex() (gw, gl, rw, rl [MaxOutcomeCode]string) {
	for _, r := range outcomeTable {
		if r.Call == CallGrab {
			gw[r.Code], gl[r.Code] = r.Word, r.Label
		} else {
			rw[r.Code], rl[r.Code] = r.Word, r.Label
		}
	}
	return
}

// String is the outcome as the API spells it: "granted",
// "already_granted", "sold_out", "not_open", "closed", "paused" or
// "blocked" (OutcomeTable).
func (o Outcome) String() string {
	if int(o) < len(grabWords) && grabWords[o] != "" {
		return grabWords[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Label is the outcome's label on the grab metric, "" for a value that
// is no outcome.
func (o Outcome) Label() string {
	if int(o) < len(grabLabels) {
		return grabLabels[o]
	}
	return ""
}

// String is the outcome as the API spells it: "reserved", "already",
// "exhausted", "limit", "not_open", "closed", "paused" or "blocked"
// (OutcomeTable).
func (o ReserveOutcome) String() string {
	if int(o) < len(reserveWords) && reserveWords[o] != "" {
		return reserveWords[o]
	}
	return "ReserveOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Label is the outcome's label on the reservation metric, "" for a value
// that is no outcome.
func (o ReserveOutcome) Label() string {
	if int(o) < len(reserveLabels) {
		return reserveLabels[o]
	}
	return ""
}
