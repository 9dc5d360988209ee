package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
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
	CodeNotReady            = "not_ready"            // 503: a dependency is unreachable, or the server (its engine) is stopping
	CodeUnavailable         = "unavailable"          // 503, with Retry-After: the request ran out of time, the store takes no writes now, or the ledger it needs is unreachable
	CodeInternal            = "internal"             // 500
	CodeNoReservation       = "no_reservation"       // 404: the user holds no reservation of that order
	CodeExpired             = "expired"              // 409: the order's reservation expired; use a new order id
	CodeCancelled           = "cancelled"            // 409: the order's reservation was cancelled; use a new order id
	CodeConfirmed           = "confirmed"            // 409: the order's discount is confirmed; it cannot be cancelled
	CodeOrderMismatch       = "order_mismatch"       // 409: the order was reserved for another order amount; use a new order id
	CodeMisdirected         = "misdirected"          // 421: a serve bound to loopback was asked under a Host name that is not loopback (serve's guard, in front of the Server)
	CodeNoCommitment        = "no_commitment"        // 404: the campaign has no fairness commitment (created without a ledger, or before commitments)
	CodeNotClosed           = "not_closed"           // 409: the draw log of a campaign not closed yet
	CodeDrawLogExpired      = "draw_log_expired"     // 410: the campaign closed longer ago than the draw log's retention
)

// errorCodes gives each error code what every protocol answers it with:
// the HTTP status of the JSON routes and the status code of the Connect
// and gRPC procedures (rpc.go). The code is the neutral part: errorTable,
// the gates and the handlers name a code, never a status;
// TestErrorCodesHaveStatus holds every code to a row. docs/service.md's
// table of codes is checked against this one (TestRPCCodesDocumented).
var errorCodes = map[string]struct {
	http int
	rpc  connect.Code
}{
	CodeUnauthorized:        {http.StatusUnauthorized, connect.CodeUnauthenticated},
	CodeForbidden:           {http.StatusForbidden, connect.CodePermissionDenied},
	CodeNotFound:            {http.StatusNotFound, connect.CodeNotFound},
	CodeNoGrant:             {http.StatusNotFound, connect.CodeNotFound},
	CodeInvalidJSON:         {http.StatusBadRequest, connect.CodeInvalidArgument},
	CodeInvalidRequest:      {http.StatusBadRequest, connect.CodeInvalidArgument},
	CodeInvalidID:           {http.StatusBadRequest, connect.CodeInvalidArgument},
	CodeBodyTooLarge:        {http.StatusRequestEntityTooLarge, connect.CodeResourceExhausted},
	CodeRateLimited:         {http.StatusTooManyRequests, connect.CodeResourceExhausted},
	CodeBusy:                {http.StatusServiceUnavailable, connect.CodeUnavailable},
	CodeOutcomeUnknown:      {http.StatusServiceUnavailable, connect.CodeUnavailable},
	CodeInProgress:          {http.StatusConflict, connect.CodeAborted},
	CodeIdempotencyMismatch: {http.StatusUnprocessableEntity, connect.CodeAlreadyExists},
	CodeNotReady:            {http.StatusServiceUnavailable, connect.CodeUnavailable},
	CodeUnavailable:         {http.StatusServiceUnavailable, connect.CodeUnavailable},
	CodeInternal:            {http.StatusInternalServerError, connect.CodeInternal},
	CodeNoReservation:       {http.StatusNotFound, connect.CodeNotFound},
	CodeExpired:             {http.StatusConflict, connect.CodeFailedPrecondition},
	CodeCancelled:           {http.StatusConflict, connect.CodeFailedPrecondition},
	CodeConfirmed:           {http.StatusConflict, connect.CodeFailedPrecondition},
	CodeOrderMismatch:       {http.StatusConflict, connect.CodeFailedPrecondition},
	CodeMisdirected:         {http.StatusMisdirectedRequest, connect.CodePermissionDenied},
	CodeNoCommitment:        {http.StatusNotFound, connect.CodeNotFound},
	CodeNotClosed:           {http.StatusConflict, connect.CodeFailedPrecondition},
	CodeDrawLogExpired:      {http.StatusGone, connect.CodeNotFound},
}

// requestError is an answer of the error shape, whatever the protocol: a
// code and a message that is safe to send. With retry set it asks the
// client to wait Config.RetryAfter (Retry-After). Handlers return it for
// a client's mistake and the gates refuse with the refusals below; the
// engine's errors are turned into it by errorTable. Its HTTP status
// follows from its code (errorCodes).
type requestError struct {
	code  string
	msg   string
	retry bool
}

// httpStatus is the HTTP status the error is answered with.
func (e *requestError) httpStatus() int {
	if c, ok := errorCodes[e.code]; ok {
		return c.http
	}
	return http.StatusInternalServerError
}

// rpcCode is the Connect and gRPC status code the error is answered with.
func (e *requestError) rpcCode() connect.Code {
	if c, ok := errorCodes[e.code]; ok {
		return c.rpc
	}
	return connect.CodeInternal
}

func (e *requestError) Error() string { return e.code + ": " + e.msg }

// The refusals of the gates and handlers, by what they refuse.
var (
	errNoRoute        = &requestError{code: CodeNotFound, msg: "no such route"}
	errInternal       = &requestError{code: CodeInternal, msg: "internal error"}
	errNeedUserToken  = &requestError{code: CodeUnauthorized, msg: "a valid user token is required"}
	errNeedAdminKey   = &requestError{code: CodeUnauthorized, msg: "a valid admin key is required"}
	errNeedPaymentKey = &requestError{code: CodeUnauthorized, msg: "a valid payment key is required"}
	errNeedMetricsKey = &requestError{code: CodeUnauthorized, msg: "a metrics key or an admin key is required"}
	errUserNotPayment = &requestError{code: CodeForbidden, msg: "this route takes the payment system's key, not a user token"}
	errAddressLimit   = &requestError{code: CodeRateLimited, msg: "too many requests from this address"}
	errUserLimit      = &requestError{code: CodeRateLimited, msg: "too many requests from this user"}
	errAuthFailLimit  = &requestError{code: CodeRateLimited, msg: "too many failed authentications from this address"}
	errGlobalLimit    = &requestError{code: CodeRateLimited, msg: "the service is at its request limit"}
	errDemoLimit      = &requestError{code: CodeRateLimited, msg: "too many demo players from this address"}
	errShuttingDown   = &requestError{code: CodeNotReady, msg: "shutting down"}
	errEngineClosed   = &requestError{code: CodeNotReady, msg: "this instance is stopping and takes no more requests; nothing was done, retry on another"}
	errLiveViewsFull  = &requestError{code: CodeBusy, msg: "too many live views are open; retry later", retry: true}
	errLedgerUnread   = &requestError{code: CodeUnavailable, msg: "the ledger cannot be read to check this Idempotency-Key; retry"}
	errLedgerDown     = &requestError{code: CodeUnavailable, retry: true,
		msg: "the ledger is unreachable, and this request needs it (a new campaign, or the next block of a campaign's packets, is recorded there first); nothing was done; retry shortly"}
	errCreateLoading = &requestError{code: CodeInProgress, msg: "a create with this Idempotency-Key is in progress; retry", retry: true}
	errKeyReused     = &requestError{code: CodeIdempotencyMismatch, msg: "this Idempotency-Key was used for another campaign"}
	errKeyRetired    = &requestError{code: CodeIdempotencyMismatch, msg: "this Idempotency-Key named a campaign that is settled and retired; use a new key"}
)

// errorRow answers the errors that are any of is, or, with as, those that
// as turns into an answer (typed errors, answered from their fields).
// A failed grab or discount call is counted under its code when package
// metrics labels its error so (metrics.ErrorLabel: not_found, busy,
// outcome_unknown and the reservation refusals), else as "error";
// TestErrorTable holds the two together.
type errorRow struct {
	is     []error
	as     func(error) *requestError
	answer *requestError
}

// errorTable maps the errors of the engine, settle and decoding to the
// answers of the error shape: the first row that matches answers. It is
// the one place where an error gets its status and code. An error no row
// matches is internal: logged, and answered without its text.
var errorTable = []errorRow{
	{as: func(err error) *requestError {
		var re *requestError
		if errors.As(err, &re) {
			return re
		}
		return nil
	}},
	{is: []error{hongbao.ErrNoReservation},
		answer: &requestError{code: CodeNoReservation, msg: "this user holds no reservation of this order"}},
	{is: []error{hongbao.ErrReservationExpired},
		answer: &requestError{code: CodeExpired, msg: "the reservation of this order expired; its discount went back (reserve again with a new order id)"}},
	{is: []error{hongbao.ErrReservationCancelled},
		answer: &requestError{code: CodeCancelled, msg: "the reservation of this order was cancelled (reserve again with a new order id)"}},
	{is: []error{hongbao.ErrReservationConfirmed},
		answer: &requestError{code: CodeConfirmed, msg: "the discount of this order is confirmed; it can no longer be cancelled"}},
	{is: []error{hongbao.ErrOrderMismatch},
		answer: &requestError{code: CodeOrderMismatch, msg: "this order was reserved for another order amount (reserve a new amount with a new order id)"}},
	{is: []error{hongbao.ErrCampaignRetired}, answer: errKeyRetired},
	// Before the deadline row: the create's wait for another one ended.
	{is: []error{hongbao.ErrCreateInProgress}, answer: errCreateLoading},
	{is: []error{hongbao.ErrCampaignNotFound, settle.ErrNoCampaign},
		answer: &requestError{code: CodeNotFound, msg: "no such campaign"}},
	{is: []error{hongbao.ErrNoGrant},
		answer: &requestError{code: CodeNoGrant, msg: "you hold no packet of this campaign"}},
	{is: []error{hongbao.ErrNoCommitment},
		answer: &requestError{code: CodeNoCommitment, msg: "this campaign has no fairness commitment"}},
	{is: []error{hongbao.ErrNotClosed},
		answer: &requestError{code: CodeNotClosed, msg: "the draw log is published once the campaign closed"}},
	{is: []error{hongbao.ErrDrawLogExpired},
		answer: &requestError{code: CodeDrawLogExpired, msg: "this campaign's draw log is past its retention"}},
	{is: []error{hongbao.ErrNotSettled},
		answer: &requestError{code: CodeUnavailable, retry: true, msg: "this grant is being recorded in the ledger; its receipt is ready within seconds: retry"}},
	{as: func(err error) *requestError {
		var e *hongbao.IDError
		if errors.As(err, &e) {
			return &requestError{code: CodeInvalidID, msg: fmt.Sprintf("invalid %s id: %s", e.Kind, e.Reason)}
		}
		return nil
	}},
	{as: func(err error) *requestError {
		var e *hongbao.SpecError
		if errors.As(err, &e) {
			return badRequest(CodeInvalidRequest, "invalid campaign: %s: %s", e.Field, e.Reason)
		}
		return nil
	}},
	{as: func(err error) *requestError {
		var e *hongbao.AmountError
		if errors.As(err, &e) {
			return badRequest(CodeInvalidRequest, "invalid amount: %s", e.Reason)
		}
		return nil
	}},
	// The engine gives these as the typed errors above; should one come
	// bare, the client still hears nothing of its text.
	{is: []error{hongbao.ErrInvalidSpec, hongbao.ErrInvalidAmount},
		answer: &requestError{code: CodeInvalidRequest, msg: "invalid campaign"}},
	{is: []error{hongbao.ErrBusy},
		answer: &requestError{code: CodeBusy, retry: true,
			msg: "busy (too many requests waiting, or Redis moving or restarting); nothing was done, retry shortly"}},
	// Before ErrUnavailable, of which it is a case.
	{is: []error{hongbao.ErrLedgerUnavailable}, answer: errLedgerDown},
	{is: []error{hongbao.ErrUnavailable},
		answer: &requestError{code: CodeUnavailable, msg: "the store takes no writes now; retrying is safe", retry: true}},
	// The engine was shut down, or its Redis client closed, before the
	// call: nothing was done and this process will do nothing more, so
	// the answer is the stopping server's, not a retry here.
	{is: []error{hongbao.ErrClosed}, answer: errEngineClosed},
	// Before ErrOutcomeUnknown: unknown too, but not because an answer
	// was lost; the message says why.
	{as: func(err error) *requestError {
		var e *hongbao.ReplicasError
		if errors.As(err, &e) {
			return &requestError{code: CodeOutcomeUnknown, retry: true,
				msg: fmt.Sprintf("too few Redis replicas: %d of the %d this service waits for acknowledged the write in time; "+
					"it is on the primary but not yet safe from a failover, so its outcome is unknown; retrying is safe", e.Acked, e.Wanted)}
		}
		return nil
	}},
	{is: []error{hongbao.ErrOutcomeUnknown},
		answer: &requestError{code: CodeOutcomeUnknown, msg: "the answer was lost; retrying is safe", retry: true}},
	{is: []error{context.DeadlineExceeded, context.Canceled},
		answer: &requestError{code: CodeUnavailable, msg: "the request ran out of time; retry", retry: true}},
}

// answerOf finds err's answer in errorTable. It is nil for an internal
// error.
func answerOf(err error) *requestError {
	for i := range errorTable {
		row := &errorTable[i]
		if row.as != nil {
			if a := row.as(err); a != nil {
				return a
			}
			continue
		}
		for _, target := range row.is {
			if errors.Is(err, target) {
				return row.answer
			}
		}
	}
	return nil
}

// fail answers an error from the engine, settle, decoding or a handler's
// refusal in the error shape (answerFor).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.refuse(w, s.answerFor(r.Pattern, err), 0)
}

// answerFor is the answer to an error of route's operation, whatever the
// protocol, through errorTable. Client mistakes are answered from the
// fields of their typed errors, never from an error's text; anything else
// is logged and answered without its text.
func (s *Server) answerFor(route string, err error) *requestError {
	a := answerOf(err)
	switch {
	case a == nil:
		s.log.Error("request failed", "route", route, "err", err)
		a = errInternal
	case a == errLedgerDown:
		// One line a period, not one per request: in an outage every
		// create and every grab that needs a new block lands here.
		if n, ok := s.ledgerLog.sample(time.Now()); ok {
			s.log.Warn("the ledger is unreachable: creates and grabs that need the next block of a pool answer 503 unavailable; grabs of opened blocks and reads go on",
				"refused", n, "route", route, "err", err)
		}
	case isReplicasShort(err):
		// As for the ledger: every write lands here until the replicas
		// are back.
		if n, ok := s.replicasLog.sample(time.Now()); ok {
			s.log.Warn("too few Redis replicas acknowledge writes in time: grabs and discount calls answer 503 outcome_unknown; /readyz names the replicas attached",
				"refused", n, "route", route, "err", err)
		}
	case a.code == CodeOutcomeUnknown:
		s.log.Warn("outcome unknown", "route", route, "err", err)
	}
	return a
}

// isReplicasShort says whether err is a WAIT that too few replicas
// acknowledged.
func isReplicasShort(err error) bool {
	var e *hongbao.ReplicasError
	return errors.As(err, &e)
}

// refuse answers a in the error shape. wait, when positive, is sent as
// Retry-After (a rate limit's); else a's retry sends Config.RetryAfter.
func (s *Server) refuse(w http.ResponseWriter, a *requestError, wait time.Duration) {
	if wait <= 0 && a.retry {
		wait = s.cfg.RetryAfter
	}
	writeError(w, a.httpStatus(), a.code, a.msg, wait)
}

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
