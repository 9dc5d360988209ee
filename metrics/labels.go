package metrics

import (
	"cmp"
	"errors"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// The label of a call that failed, by the error it failed with. The API
// answers these errors with the codes of the same spelling (httpapi's
// tests hold them equal); any other error is "error".
var errorLabels = []struct {
	err   error
	label string
}{
	{hongbao.ErrNoReservation, "no_reservation"},
	{hongbao.ErrReservationExpired, "expired"},
	{hongbao.ErrReservationCancelled, "cancelled"},
	{hongbao.ErrReservationConfirmed, "confirmed"},
	{hongbao.ErrOrderMismatch, "order_mismatch"},
	{hongbao.ErrCampaignNotFound, "not_found"},
	{settle.ErrNoCampaign, "not_found"},
	{hongbao.ErrBusy, "busy"},
	{hongbao.ErrOutcomeUnknown, "outcome_unknown"},
	{hongbao.ErrUnavailable, "unavailable"},
}

// ErrorLabel is the outcome label of a grab or discount call that failed
// with err: not_found, busy, outcome_unknown, unavailable, no_reservation,
// expired, cancelled, confirmed or order_mismatch, else error.
func ErrorLabel(err error) string {
	for _, l := range errorLabels {
		if errors.Is(err, l.err) {
			return l.label
		}
	}
	return "error"
}

// GrabLabel is the outcome label of a grab: its outcome as the API spells
// it (granted, already_granted, sold_out, not_open, closed, paused,
// blocked), or ErrorLabel of its error.
func GrabLabel(ev hongbao.GrabEvent) string {
	if ev.Err != nil {
		return ErrorLabel(ev.Err)
	}
	if l := ev.Grant.Outcome.Label(); l != "" {
		return l
	}
	return "error"
}

// DiscountLabel is the outcome label of a discount call, as the API
// answers it: a reserve's outcome (reserved, already, exhausted, limit,
// not_open, closed, paused, blocked); confirmed or cancelled (expired
// for a cancel of a reservation whose hold had passed), prefixed with
// already_ when repeated; or ErrorLabel of its error.
func DiscountLabel(ev hongbao.DiscountEvent) string {
	r := ev.Reservation
	switch {
	case ev.Err != nil:
		return ErrorLabel(ev.Err)
	case ev.Op == hongbao.OpReserve:
		return cmp.Or(r.Outcome.Label(), "error")
	case ev.Op == hongbao.OpConfirm:
		return again(r.Again, "confirmed")
	case r.State == hongbao.Expired:
		return again(r.Again, "expired")
	default:
		return again(r.Again, "cancelled")
	}
}

// again is the label of an answer that repeats an earlier one.
func again(repeat bool, outcome string) string {
	if repeat {
		return "already_" + outcome
	}
	return outcome
}
