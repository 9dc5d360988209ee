package webhook

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hongbao/hongbao/ledger"
)

// Sentinel errors. Compare with errors.Is.
var (
	// ErrConfig: New was given a Config it cannot work with. A
	// *ConfigError names the field.
	ErrConfig = errors.New("webhook: invalid config")
	// ErrSignature: a request's signature or timestamp header is missing,
	// malformed or does not match its body under the secret.
	ErrSignature = errors.New("webhook: bad signature")
	// ErrExpired: a correctly signed request was signed outside the
	// replay window.
	ErrExpired = errors.New("webhook: signature timestamp outside the window")
	// ErrRejected: the host answered with a status that retrying will not
	// change (4xx other than 408 and 429). The typed *RejectedError
	// unwraps to it.
	ErrRejected = errors.New("webhook: rejected by host")
	// ErrUnavailable: the host could not be reached, timed out or answered
	// 408, 429 or 5xx on every attempt. It wraps the last failure.
	ErrUnavailable = errors.New("webhook: host unavailable")
	// ErrReply: the host answered 2xx with a body that is not a valid
	// reply: a grants reply that does not say which grants it refused, or
	// a totals reply that is not a TotalsReply for the campaign asked.
	ErrReply = errors.New("webhook: malformed reply")
	// ErrRequest: a host's ReadEvent got a request it cannot read as an
	// event (an unreadable or oversized body, or one without type or
	// campaign), or Event.Decode a body that is not the event's struct.
	ErrRequest = errors.New("webhook: malformed request")
)

// ConfigError names the field of a Config that New (or Config.Validate,
// or DefaultName) refused, and why: "webhook: invalid config:
// Config.MaxAttempts: must be at least 1, got -1". It has the shape of
// hongbao.ConfigError. Value is never a secret: the Secret's value, and a
// URL, which may hold a password, are left out.
type ConfigError struct {
	Field  string // as Go code names it: "Config.Secret"
	Value  string // the refused value as text, when it is shown; else empty
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string {
	msg := ErrConfig.Error() + ": " + e.Field + ": " + e.Reason
	if e.Value != "" {
		msg += ", got " + e.Value
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// RejectedError is an ErrRejected with the host's answer, for the incident
// report. Body is a short excerpt of the response body.
type RejectedError struct {
	Event  string // EventFund, EventGrants, EventRefund or EventTotals
	Key    string // the request's idempotency key
	Status int
	Body   string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("webhook: %s %s rejected by host: %d %s: %q",
		e.Event, e.Key, e.Status, http.StatusText(e.Status), e.Body)
}

// Unwrap makes errors.Is(err, ErrRejected) hold; for a 409 answer to a
// fund or refund event errors.Is(err, ledger.ErrConflict) too: the host
// holds that entry with other values, as the ledger would say; and for a
// grants event errors.Is(err, ledger.ErrInvalid): the host will never take
// that batch, so the settle worker isolates the grant at fault and moves
// its entry to the dead stream instead of retrying it forever.
func (e *RejectedError) Unwrap() []error {
	switch {
	case e.Status == http.StatusConflict && (e.Event == EventFund || e.Event == EventRefund):
		return []error{ErrRejected, ledger.ErrConflict}
	case e.Event == EventGrants:
		return []error{ErrRejected, ledger.ErrInvalid}
	}
	return []error{ErrRejected}
}
