package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Error codes of the error shape. They are stable: clients may switch on
// them.
const (
	CodeUnauthorized        = "unauthorized"         // 401: missing or bad credentials
	CodeForbidden           = "forbidden"            // 403: valid credentials of a class this route does not take
	CodeNotFound            = "not_found"            // 404: no such campaign or route
	CodeNoGrant             = "no_grant"             // 404: the user holds no packet of the campaign
	CodeInvalidJSON         = "invalid_json"         // 400: malformed JSON, unknown fields, trailing data
	CodeInvalidRequest      = "invalid_request"      // 400: a field has a bad value
	CodeInvalidID           = "invalid_id"           // 400: a campaign id with bad length or characters
	CodeBodyTooLarge        = "body_too_large"       // 413
	CodeRateLimited         = "rate_limited"         // 429, with Retry-After
	CodeBusy                = "busy"                 // 503, with Retry-After: the grab queue is full
	CodeOutcomeUnknown      = "outcome_unknown"      // 503, with Retry-After: retrying the grab is safe
	CodeInProgress          = "in_progress"          // 409, with Retry-After: a create with this Idempotency-Key is loading
	CodeIdempotencyMismatch = "idempotency_mismatch" // 422: the Idempotency-Key was used for another campaign spec
	CodeNotReady            = "not_ready"            // 503: a dependency is unreachable or the server is stopping
	CodeUnavailable         = "unavailable"          // 503: the request ran out of time, or the store takes no writes now
	CodeInternal            = "internal"             // 500
	CodeNoReservation       = "no_reservation"       // 404: the user holds no reservation of that order
	CodeExpired             = "expired"              // 409: the order's reservation expired; use a new order id
	CodeCancelled           = "cancelled"            // 409: the order's reservation was cancelled; use a new order id
	CodeConfirmed           = "confirmed"            // 409: the order's discount is confirmed; it cannot be cancelled
	CodeOrderMismatch       = "order_mismatch"       // 409: the order was reserved for another order amount; use a new order id
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers the error shape. retry, when positive, is sent as
// Retry-After in whole seconds (at least 1).
func writeError(w http.ResponseWriter, status int, code, msg string, retry time.Duration) {
	if retry > 0 {
		secs := int((retry + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Our own types always marshal; this is a programming error.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	writeBody(w, status, append(b, '\n'))
}

// The headers of every JSON answer, in canonical form. They are assigned
// to the header map directly: Header().Set would canonicalize the keys
// and allocate on every answer. net/http never modifies these slices.
var (
	hdrJSON    = []string{"application/json"}
	hdrNoStore = []string{"no-store"}
	hdrNosniff = []string{"nosniff"}
)

// writeBody sends a JSON body with the headers every answer carries.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Cache-Control"] = hdrNoStore
	h["X-Content-Type-Options"] = hdrNosniff
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
