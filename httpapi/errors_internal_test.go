package httpapi

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/settle"
)

// TestErrorTable: every error the engine, settle and decoding give, bare
// or wrapped as the engine wraps them, answers its status, code and
// Retry-After, and its metric label; an error no row knows answers 500
// without its text.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{RetryAfter: 2 * time.Second}, log: quietLog()}
	for _, tc := range []struct {
		err    error
		status int
		code   string
		retry  string
		label  string
	}{
		{hongbao.ErrCampaignNotFound, 404, CodeNotFound, "", "not_found"},
		{settle.ErrNoCampaign, 404, CodeNotFound, "", "not_found"},
		{hongbao.ErrNoGrant, 404, CodeNoGrant, "", "error"},
		{hongbao.ErrNoReservation, 404, CodeNoReservation, "", "no_reservation"},
		{hongbao.ErrReservationExpired, 409, CodeExpired, "", "expired"},
		{hongbao.ErrReservationCancelled, 409, CodeCancelled, "", "cancelled"},
		{hongbao.ErrReservationConfirmed, 409, CodeConfirmed, "", "confirmed"},
		{hongbao.ErrOrderMismatch, 409, CodeOrderMismatch, "", "order_mismatch"},
		{hongbao.ErrCampaignRetired, 422, CodeIdempotencyMismatch, "", "error"},
		{&hongbao.IDError{Kind: "user", ID: "x y", Reason: "bad"}, 400, CodeInvalidID, "", "error"},
		{&hongbao.SpecError{Field: "count", Reason: "must be at least 1"}, 400, CodeInvalidRequest, "", "error"},
		{&hongbao.AmountError{Input: "1.234", Reason: "too many decimals"}, 400, CodeInvalidRequest, "", "error"},
		{hongbao.ErrInvalidSpec, 400, CodeInvalidRequest, "", "error"},
		{hongbao.ErrBusy, 503, CodeBusy, "2", "busy"},
		{hongbao.ErrUnavailable, 503, CodeUnavailable, "2", "unavailable"},
		{hongbao.ErrLedgerUnavailable, 503, CodeUnavailable, "2", "unavailable"},
		{hongbao.ErrOutcomeUnknown, 503, CodeOutcomeUnknown, "2", "outcome_unknown"},
		{&hongbao.ReplicasError{Wanted: 2, Acked: 1}, 503, CodeOutcomeUnknown, "2", "outcome_unknown"},
		{hongbao.ErrClosed, 503, CodeNotReady, "", "error"},
		{context.DeadlineExceeded, 503, CodeUnavailable, "2", "error"},
		{badRequest(CodeInvalidJSON, "malformed JSON"), 400, CodeInvalidJSON, "", "error"},
		{errCreateLoading, 409, CodeInProgress, "2", "error"},
		{fmt.Errorf("%w: %w", hongbao.ErrCreateInProgress, context.DeadlineExceeded), 409, CodeInProgress, "2", "error"},
		{errors.New("redis: connection reset by a secret host"), 500, CodeInternal, "", "error"},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("hongbao: grab c1: %w", tc.err)} {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/v1/campaigns/c1/grab", nil)
			s.fail(w, r, err)
			require.Equal(t, tc.status, w.Code, "%v", err)
			require.Contains(t, w.Body.String(), `"code":"`+tc.code+`"`, "%v", err)
			require.NotContains(t, w.Body.String(), "secret host", "no internal text")
			require.Equal(t, tc.retry, w.Header().Get("Retry-After"), "%v", err)
			// The metric label is the API's code, or "error".
			require.Equal(t, tc.label, metrics.ErrorLabel(err), "%v", err)
			require.True(t, tc.label == "error" || tc.label == tc.code, "%v: label %s, code %s", err, tc.label, tc.code)
		}
	}
}

// TestLedgerDownLogSampled: in a ledger outage every create and every
// grab that needs a new block is refused; the log says so once a period,
// naming the ledger and how many were refused, not once a request.
func TestLedgerDownLogSampled(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	s := &Server{cfg: Config{RetryAfter: time.Second}, log: slog.New(slog.NewTextHandler(&log, nil))}
	err := fmt.Errorf("hongbao: grab c1: %w", hongbao.ErrLedgerUnavailable)
	for range 100 {
		w := httptest.NewRecorder()
		s.fail(w, httptest.NewRequest(http.MethodPost, "/v1/campaigns/c1/grab", nil), err)
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Contains(t, w.Body.String(), `"code":"unavailable"`)
		require.Contains(t, w.Body.String(), "ledger")
		require.Equal(t, "1", w.Header().Get("Retry-After"))
	}
	require.Equal(t, 1, strings.Count(log.String(), "\n"), log.String())
	require.Contains(t, log.String(), "the ledger is unreachable")
}

// TestReplicasShortSaysSo: a grab whose WAIT too few replicas
// acknowledged is outcome_unknown (its grant is on the primary: a retry is
// safe and the client must not take it for nothing done), and its message
// names the replicas, not a lost answer; the log says so once a period.
func TestReplicasShortSaysSo(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	s := &Server{cfg: Config{RetryAfter: time.Second}, log: slog.New(slog.NewTextHandler(&log, nil))}
	err := fmt.Errorf("hongbao: grab c1: %w", &hongbao.ReplicasError{Wanted: 1, Acked: 0})
	for range 50 {
		w := httptest.NewRecorder()
		s.fail(w, httptest.NewRequest(http.MethodPost, "/v1/campaigns/c1/grab", nil), err)
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		require.Contains(t, w.Body.String(), `"code":"outcome_unknown"`)
		require.Contains(t, w.Body.String(), "too few Redis replicas: 0 of the 1")
		require.NotContains(t, w.Body.String(), "lost")
		require.Equal(t, "1", w.Header().Get("Retry-After"))
	}
	require.Equal(t, 1, strings.Count(log.String(), "\n"), log.String())
	require.Contains(t, log.String(), "too few Redis replicas")
}

// TestErrorCodesHaveStatus: every error code errors.go declares has its
// row in errorCodes, so no code answers a status by accident.
func TestErrorCodesHaveStatus(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for i, name := range spec.(*ast.ValueSpec).Names {
				if !strings.HasPrefix(name.Name, "Code") {
					continue
				}
				code, err := strconv.Unquote(spec.(*ast.ValueSpec).Values[i].(*ast.BasicLit).Value)
				require.NoError(t, err)
				_, ok := errorCodes[code]
				require.True(t, ok, "%s (%q) has no row in errorCodes", name.Name, code)
				n++
			}
		}
	}
	require.Len(t, errorCodes, n, "errorCodes has a row for a code errors.go does not declare")
}
