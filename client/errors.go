package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/client/internal/userid"
)

// Sentinels, one per error code of the service. An *Error matches the one
// of its code with errors.Is.
var (
	ErrUnauthorized        = errors.New("hongbao: unauthorized")         // 401: missing or bad credentials
	ErrForbidden           = errors.New("hongbao: forbidden")            // 403: a credential of a class this route does not take
	ErrNotFound            = errors.New("hongbao: not found")            // 404: no such campaign
	ErrNoGrant             = errors.New("hongbao: no grant")             // 404: the user holds no packet of the campaign
	ErrInvalidJSON         = errors.New("hongbao: invalid JSON")         // 400
	ErrInvalidRequest      = errors.New("hongbao: invalid request")      // 400: a field has a bad value
	ErrInvalidID           = errors.New("hongbao: invalid id")           // 400: a campaign or order id with bad length or characters
	ErrBodyTooLarge        = errors.New("hongbao: body too large")       // 413
	ErrRateLimited         = errors.New("hongbao: rate limited")         // 429: nothing was done
	ErrBusy                = errors.New("hongbao: busy")                 // 503: nothing was done
	ErrOutcomeUnknown      = errors.New("hongbao: outcome unknown")      // 503, or a lost reply: the call may have taken effect
	ErrInProgress          = errors.New("hongbao: create in progress")   // 409: a create with this Idempotency-Key is loading
	ErrIdempotencyMismatch = errors.New("hongbao: idempotency mismatch") // 422: the Idempotency-Key named another spec, or a retired campaign
	ErrNotReady            = errors.New("hongbao: not ready")            // 503 from /readyz
	ErrUnavailable         = errors.New("hongbao: unavailable")          // 503: out of time, the store takes no writes now, or the ledger the call needs is unreachable: nothing was done
	ErrInternal            = errors.New("hongbao: internal error")       // 500
	ErrNoReservation       = errors.New("hongbao: no reservation")       // 404: the user holds no reservation of that order
	ErrExpired             = errors.New("hongbao: reservation expired")  // 409: reserve again with a new order id
	ErrCancelled           = errors.New("hongbao: reservation cancelled")
	ErrConfirmed           = errors.New("hongbao: discount confirmed") // 409: it can no longer be cancelled
	ErrOrderMismatch       = errors.New("hongbao: order mismatch")     // 409: the order was reserved for another amount
)

var sentinels = map[string]error{
	"unauthorized":         ErrUnauthorized,
	"forbidden":            ErrForbidden,
	"not_found":            ErrNotFound,
	"no_grant":             ErrNoGrant,
	"invalid_json":         ErrInvalidJSON,
	"invalid_request":      ErrInvalidRequest,
	"invalid_id":           ErrInvalidID,
	"body_too_large":       ErrBodyTooLarge,
	"rate_limited":         ErrRateLimited,
	"busy":                 ErrBusy,
	"outcome_unknown":      ErrOutcomeUnknown,
	"in_progress":          ErrInProgress,
	"idempotency_mismatch": ErrIdempotencyMismatch,
	"not_ready":            ErrNotReady,
	"unavailable":          ErrUnavailable,
	"internal":             ErrInternal,
	"no_reservation":       ErrNoReservation,
	"expired":              ErrExpired,
	"cancelled":            ErrCancelled,
	"confirmed":            ErrConfirmed,
	"order_mismatch":       ErrOrderMismatch,
}

// statuses is the HTTP status of each code of the service, as its JSON
// routes answer it (docs/service.md's table of codes): an error of a
// Connect or gRPC procedure, which carries the code, gets the status its
// route would have answered, so that the two cannot be told apart.
var statuses = map[string]int{
	"unauthorized":         http.StatusUnauthorized,
	"forbidden":            http.StatusForbidden,
	"not_found":            http.StatusNotFound,
	"no_grant":             http.StatusNotFound,
	"invalid_json":         http.StatusBadRequest,
	"invalid_request":      http.StatusBadRequest,
	"invalid_id":           http.StatusBadRequest,
	"body_too_large":       http.StatusRequestEntityTooLarge,
	"rate_limited":         http.StatusTooManyRequests,
	"busy":                 http.StatusServiceUnavailable,
	"outcome_unknown":      http.StatusServiceUnavailable,
	"in_progress":          http.StatusConflict,
	"idempotency_mismatch": http.StatusUnprocessableEntity,
	"not_ready":            http.StatusServiceUnavailable,
	"unavailable":          http.StatusServiceUnavailable,
	"internal":             http.StatusInternalServerError,
	"no_reservation":       http.StatusNotFound,
	"expired":              http.StatusConflict,
	"cancelled":            http.StatusConflict,
	"confirmed":            http.StatusConflict,
	"order_mismatch":       http.StatusConflict,
	"misdirected":          http.StatusMisdirectedRequest,
	"no_commitment":        http.StatusNotFound,
	"not_closed":           http.StatusConflict,
	"draw_log_expired":     http.StatusGone,
}

// Error is an error answer of the service: {"error":{"code","message"}}
// with its HTTP status. An answer that is not of this shape (a gateway's
// page) has an empty Code and the status's text as Message.
type Error struct {
	Status     int           // the HTTP status
	Code       string        // the stable code, as in ErrBusy's "busy"
	Message    string        // for people; never switch on it
	RetryAfter time.Duration // what Retry-After asked, 0 without one
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("hongbao: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("hongbao: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Unwrap returns the sentinel of the error's code (nil for a code this
// package does not know), so errors.Is(err, ErrBusy) works.
func (e *Error) Unwrap() error { return sentinels[e.Code] }

// lostError is a call whose reply did not arrive: it may have taken
// effect. It matches ErrOutcomeUnknown and wraps the transport's error.
type lostError struct{ err error }

func (e *lostError) Error() string {
	return "hongbao: outcome unknown, the reply was lost: " + e.err.Error()
}

func (e *lostError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.err} }

// notSentError is a call that never reached the service (the connection
// could not be made): nothing was done.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "hongbao: not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// class says what an attempt's error allows.
type class int

const (
	final    class = iota // no retry
	nothing               // the service did nothing: any call may be retried
	unknown               // it may have: only an idempotent call may be retried
	loadWait              // a create with this key is loading: retry (creates carry their key)
)

func classify(err error) class {
	var e *Error
	switch {
	case errors.As(err, &e):
		return classOfError(e)
	case errors.As(err, new(*notSentError)):
		return nothing
	case errors.As(err, new(*lostError)):
		return unknown
	}
	return final
}

func classOfError(e *Error) class {
	switch e.Code {
	case "rate_limited", "busy":
		return nothing
	case "outcome_unknown", "unavailable", "internal":
		return unknown
	case "in_progress":
		return loadWait
	case "":
		switch e.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return unknown
		case http.StatusTooManyRequests:
			return nothing
		}
	}
	return final
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// ValidateUserID answers nil for a user id the service accepts: 1 to 64
// bytes of A-Z a-z 0-9 _ - . : @. Else its error matches ErrInvalidID.
// A Gateway checks every id with it before queueing, so that one bad id
// does not fail the batch it would have joined.
func ValidateUserID(id string) error {
	if err := userid.Check(id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidID, err)
	}
	return nil
}
