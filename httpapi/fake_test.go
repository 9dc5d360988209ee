package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/settle"
)

// The handler tests of this file run on fakes, without Redis: they hold
// the mapping of each outcome and error to its reply, and every reply is
// checked against openapi.json as the other tests' are. The paths that
// need the real engine (its scripts, its retries) stay in the tests on
// real Redis.

// fakeEngine answers each call with the function the test set. A call it
// did not set reaches the nil Engine inside and panics: the server answers
// 500 and the test sees it.
type fakeEngine struct {
	httpapi.Engine
	mu    sync.Mutex
	calls []string

	grab     func(id, user string) (hongbao.Grant, error)
	held     func(id, user string) (hongbao.Grant, error)
	status   func(id string) (*hongbao.Status, error)
	close    func(id string) (*hongbao.Status, error)
	page     func() ([]string, int, error)
	reserve  func(id, user, order string, cents int64) (hongbao.Reservation, error)
	confirm  func(id, user, order string) (hongbao.Reservation, error)
	cancel   func(id, user, order string) (hongbao.Reservation, error)
	dstatus  func(id string) (*hongbao.DiscountStatus, error)
	dcreated func(spec hongbao.DiscountSpec) (*hongbao.Discount, error)
}

// Observe adds nothing: the fake answers without an engine to observe.
func (f *fakeEngine) Observe(hongbao.Observer) func() { return func() {} }

func (f *fakeEngine) called(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

// reset forgets the calls received.
func (f *fakeEngine) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// received is the calls received since the last reset.
func (f *fakeEngine) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// last is the last call the engine received.
func (f *fakeEngine) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeEngine) Grab(_ context.Context, id, user string) (hongbao.Grant, error) {
	f.called("grab %s %s", id, user)
	return f.grab(id, user)
}

func (f *fakeEngine) Held(_ context.Context, id, user string) (hongbao.Grant, error) {
	f.called("held %s %s", id, user)
	return f.held(id, user)
}

func (f *fakeEngine) Status(_ context.Context, id string) (*hongbao.Status, error) {
	f.called("status %s", id)
	return f.status(id)
}

func (f *fakeEngine) CloseCampaign(_ context.Context, id string) (*hongbao.Status, error) {
	f.called("close %s", id)
	return f.close(id)
}

func (f *fakeEngine) CampaignsPage(_ context.Context, offset, limit int) ([]string, int, error) {
	f.called("page %d %d", offset, limit)
	return f.page()
}

// fakeDiscounts are the discount calls of a fakeEngine: each answers with
// the engine's function for it. A call it did not set reaches the nil
// Discounts inside and panics.
type fakeDiscounts struct {
	httpapi.Discounts
	f *fakeEngine
}

func (d fakeDiscounts) Reserve(_ context.Context, id, user, order string, cents int64) (hongbao.Reservation, error) {
	d.f.called("reserve %s %s %s %d", id, user, order, cents)
	return d.f.reserve(id, user, order, cents)
}

func (d fakeDiscounts) Confirm(_ context.Context, id, user, order string) (hongbao.Reservation, error) {
	d.f.called("confirm %s %s %s", id, user, order)
	return d.f.confirm(id, user, order)
}

func (d fakeDiscounts) Cancel(_ context.Context, id, user, order string) (hongbao.Reservation, error) {
	d.f.called("cancel %s %s %s", id, user, order)
	return d.f.cancel(id, user, order)
}

func (d fakeDiscounts) Status(_ context.Context, id string) (*hongbao.DiscountStatus, error) {
	d.f.called("discount status %s", id)
	return d.f.dstatus(id)
}

func (d fakeDiscounts) Create(_ context.Context, spec hongbao.DiscountSpec) (*hongbao.Discount, error) {
	d.f.called("create discount %d %d", spec.Budget, spec.Quota)
	return d.f.dcreated(spec)
}

// fakeSettlement answers backlogs and redrives.
type fakeSettlement struct {
	backlog  settle.Backlog
	err      error
	redriven int64
}

func (f *fakeSettlement) ReadBacklog(context.Context, string) (settle.Backlog, error) {
	return f.backlog, f.err
}

func (f *fakeSettlement) Redrive(context.Context, string) (int64, error) { return f.redriven, f.err }

// fakeStore is a store that answers.
type fakeStore struct{}

func (fakeStore) Health(context.Context) hongbao.Health       { return hongbao.Health{Redis: "ok"} }
func (fakeStore) Persistence(context.Context) (string, error) { return "always", nil }
func (fakeStore) CountRequests(_ context.Context, _, n int64) (int64, error) {
	return n, nil
}

// newFakeServer serves the API on fakes.
func newFakeServer(t *testing.T, e *fakeEngine, st *fakeSettlement) *testServer {
	t.Helper()
	s, err := httpapi.New(httpapi.Config{
		Engine: e, Discounts: fakeDiscounts{f: e}, Settlement: st, Store: fakeStore{},
		UserSecrets: []httpapi.Secret{userSecret},
		AdminKeys:   [][]byte{adminKey},
		PaymentKeys: [][]byte{paymentKey},
		UserRate:    -1,
		RetryAfter:  2 * time.Second,
		Logger:      quiet(),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &testServer{URL: hs.URL, Server: s, Client: &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 10 * time.Second}}
}

// errorCase is an error of the engine's and its reply: status, code and
// Retry-After.
type errorCase struct {
	err    error
	status int
	code   string
	retry  string
}

// errorCases are the engine's errors every call may give.
var errorCases = []errorCase{
	{hongbao.ErrCampaignNotFound, http.StatusNotFound, "not_found", ""},
	{hongbao.ErrBusy, http.StatusServiceUnavailable, "busy", "2"},
	{hongbao.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", "2"},
	{hongbao.ErrOutcomeUnknown, http.StatusServiceUnavailable, "outcome_unknown", "2"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "unavailable", "2"},
	{errors.New("a store's own words"), http.StatusInternalServerError, "internal", ""},
}

// checkError checks an error reply: its status, code and Retry-After, and
// that no error text of the engine's reached the client.
func checkError(t *testing.T, r reply, status int, code, retry string) {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r.Body)
	require.Equal(t, code, r.errorCode(t))
	require.Equal(t, retry, r.Header.Get("Retry-After"))
	require.NotContains(t, string(r.Body), "own words")
	require.NotContains(t, string(r.Body), "hongbao:")
}

// TestGrabRepliesOnFakes: each outcome of the engine's grab answers 200
// with its name (and the packet when one came), each error its status and
// code; grants/me answers the packet held, or 404 no_grant.
func TestGrabRepliesOnFakes(t *testing.T) {
	t.Parallel()
	var answer hongbao.Grant
	var fail error
	e := &fakeEngine{
		grab: func(id, user string) (hongbao.Grant, error) { return answer, fail },
		held: func(id, user string) (hongbao.Grant, error) { return answer, fail },
	}
	ts := newFakeServer(t, e, &fakeSettlement{})
	tok := token(t, "alice")
	for outcome, name := range map[hongbao.Outcome]string{
		hongbao.Granted: "granted", hongbao.Already: "already_granted", hongbao.SoldOut: "sold_out",
		hongbao.NotOpen: "not_open", hongbao.Closed: "closed", hongbao.Paused: "paused", hongbao.Blocked: "blocked",
	} {
		answer, fail = hongbao.Grant{Campaign: "c1", User: "alice", Outcome: outcome}, nil
		if outcome.HasPacket() {
			answer.Seq, answer.Cents = 7, 1234
		}
		r := ts.do(t, "POST", "/v1/campaigns/c1/grab", tok, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "grab c1 alice", e.last(), "the token's user grabs the path's campaign")
		body := r.json(t)
		require.Equal(t, name, body["outcome"])
		if outcome.HasPacket() {
			require.Equal(t, map[string]any{"campaign": "c1", "outcome": name, "packet_id": "c1/7", "amount": "12.34", "amount_cents": 1234.0}, body)
		} else {
			require.Equal(t, map[string]any{"campaign": "c1", "outcome": name}, body)
		}
	}
	for _, tc := range errorCases {
		answer, fail = hongbao.Grant{}, fmt.Errorf("hongbao: grab c1: %w", tc.err)
		checkError(t, ts.do(t, "POST", "/v1/campaigns/c1/grab", tok, ""), tc.status, tc.code, tc.retry)
	}

	answer, fail = hongbao.Grant{Campaign: "c1", User: "alice", Outcome: hongbao.Granted, Seq: 3, Cents: 50}, nil
	r := ts.do(t, "GET", "/v1/campaigns/c1/grants/me", tok, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "held c1 alice", e.last())
	require.Equal(t, map[string]any{"campaign": "c1", "packet_id": "c1/3", "amount": "0.50", "amount_cents": 50.0}, r.json(t))
	answer, fail = hongbao.Grant{}, hongbao.ErrNoGrant
	checkError(t, ts.do(t, "GET", "/v1/campaigns/c1/grants/me", tok, ""), http.StatusNotFound, "no_grant", "")

	// Refused before the engine: no call reaches it.
	e.reset()
	checkError(t, ts.do(t, "POST", "/v1/campaigns/bad%20id/grab", tok, ""), http.StatusBadRequest, "invalid_id", "")
	checkError(t, ts.do(t, "POST", "/v1/campaigns/c1/grab", tok, `{"x":1}`), http.StatusBadRequest, "invalid_json", "")
	checkError(t, ts.do(t, "POST", "/v1/campaigns/c1/grab", "", ""), http.StatusUnauthorized, "unauthorized", "")
	require.Empty(t, e.received())
}

// TestDiscountRepliesOnFakes: each outcome of reserve, confirm and cancel
// answers 200 with its name, each error of the order's state its status
// and code (404 no_reservation, 409 expired, cancelled, confirmed,
// order_mismatch), and the engine's common errors theirs.
func TestDiscountRepliesOnFakes(t *testing.T) {
	t.Parallel()
	var answer hongbao.Reservation
	var fail error
	answerOf := func(_, _, _ string) (hongbao.Reservation, error) { return answer, fail }
	e := &fakeEngine{
		reserve: func(id, user, order string, _ int64) (hongbao.Reservation, error) { return answerOf(id, user, order) },
		confirm: answerOf, cancel: answerOf,
	}
	ts := newFakeServer(t, e, &fakeSettlement{})
	pay := string(paymentKey)
	reserve := func() reply {
		return ts.do(t, "POST", "/v1/discounts/d1/reserve", pay, `{"user_id":"bob","order_id":"o-1","order_amount":"80.00"}`)
	}
	orderURL := "/v1/discounts/d1/orders/o-1/"
	expires := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, outcome := range []hongbao.ReserveOutcome{hongbao.Reserved, hongbao.ReservedAlready, hongbao.Exhausted,
		hongbao.ReserveNotOpen, hongbao.ReserveClosed, hongbao.OverLimit, hongbao.ReservePaused, hongbao.ReserveBlocked} {
		answer, fail = hongbao.Reservation{Campaign: "d1", User: "bob", Order: "o-1", Outcome: outcome}, nil
		want := map[string]any{"outcome": outcome.String(), "order_id": "o-1"}
		if outcome.HasAmount() {
			answer.State, answer.Seq, answer.Cents, answer.ExpiresAt = hongbao.Held, 1, 500, expires
			want["amount"], want["amount_cents"], want["expires_at"] = "5.00", 500.0, "2031-01-02T03:04:05Z"
		}
		r := reserve()
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "reserve d1 bob o-1 8000", e.last())
		require.Equal(t, want, r.json(t), "%s", outcome)
	}

	answer, fail = hongbao.Reservation{Campaign: "d1", User: "bob", Order: "o-1", State: hongbao.Confirmed, Cents: 500}, nil
	r := ts.do(t, "POST", orderURL+"confirm", pay, `{"user_id":"bob"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "confirm d1 bob o-1", e.last())
	require.Equal(t, map[string]any{"outcome": "confirmed", "order_id": "o-1", "amount": "5.00", "amount_cents": 500.0}, r.json(t))
	for state, name := range map[hongbao.ReservationState]string{hongbao.Cancelled: "cancelled", hongbao.Expired: "expired"} {
		answer, fail = hongbao.Reservation{Campaign: "d1", User: "bob", Order: "o-1", State: state}, nil
		r := ts.do(t, "POST", orderURL+"cancel", pay, `{"user_id":"bob"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "cancel d1 bob o-1", e.last())
		require.Equal(t, map[string]any{"outcome": name, "order_id": "o-1"}, r.json(t))
	}

	cases := append([]errorCase{
		{hongbao.ErrNoReservation, http.StatusNotFound, "no_reservation", ""},
		{hongbao.ErrReservationExpired, http.StatusConflict, "expired", ""},
		{hongbao.ErrReservationCancelled, http.StatusConflict, "cancelled", ""},
		{hongbao.ErrReservationConfirmed, http.StatusConflict, "confirmed", ""},
		{hongbao.ErrOrderMismatch, http.StatusConflict, "order_mismatch", ""},
	}, errorCases...)
	for _, tc := range cases {
		answer, fail = hongbao.Reservation{}, fmt.Errorf("hongbao: d1: %w", tc.err)
		checkError(t, reserve(), tc.status, tc.code, tc.retry)
		checkError(t, ts.do(t, "POST", orderURL+"confirm", pay, `{"user_id":"bob"}`), tc.status, tc.code, tc.retry)
		checkError(t, ts.do(t, "POST", orderURL+"cancel", pay, `{"user_id":"bob"}`), tc.status, tc.code, tc.retry)
	}

	// A user's own token may not reserve: 403, and nothing reaches the
	// engine.
	e.reset()
	r = ts.do(t, "POST", "/v1/discounts/d1/reserve", token(t, "bob"), `{"user_id":"bob","order_id":"o-1","order_amount":"80.00"}`)
	checkError(t, r, http.StatusForbidden, "forbidden", "")
	require.Empty(t, e.received())
}

// TestDiscountCreateRepliesOnFakes: a create whose Idempotency-Key names
// a campaign another create is still loading answers 409 in_progress; one
// that names a campaign of another spec 422 idempotency_mismatch; one the
// engine finds retired 422 too.
func TestDiscountCreateRepliesOnFakes(t *testing.T) {
	t.Parallel()
	var created error
	var status *hongbao.DiscountStatus
	var statusErr error
	e := &fakeEngine{
		dcreated: func(hongbao.DiscountSpec) (*hongbao.Discount, error) { return nil, created },
		dstatus:  func(string) (*hongbao.DiscountStatus, error) { return status, statusErr },
	}
	ts := newFakeServer(t, e, &fakeSettlement{})
	admin := string(adminKey)
	create := func() reply {
		return ts.do(t, "POST", "/v1/discounts", admin, `{"budget":"5.00","quota":5}`, "Idempotency-Key", "key-1")
	}
	created = &hongbao.ExistsError{ID: "x"}
	status, statusErr = nil, hongbao.ErrCampaignNotFound
	checkError(t, create(), http.StatusConflict, "in_progress", "2")
	status, statusErr = &hongbao.DiscountStatus{Discount: hongbao.Discount{Budget: 900, Quota: 5}}, nil
	checkError(t, create(), http.StatusUnprocessableEntity, "idempotency_mismatch", "")
	created = fmt.Errorf("hongbao: create discount x: %w", hongbao.ErrCampaignRetired)
	checkError(t, create(), http.StatusUnprocessableEntity, "idempotency_mismatch", "")
	created = hongbao.ErrBusy
	checkError(t, create(), http.StatusServiceUnavailable, "busy", "2")
}

// TestConsoleRepliesOnFakes: the console's reads and actions answer the
// campaign with its settlement backlog, the list of live campaigns, the
// redrive's count, and the errors of the engine and of settlement as
// every route does.
func TestConsoleRepliesOnFakes(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	st := &hongbao.Status{
		Campaign: hongbao.Campaign{ID: "c1", State: hongbao.StateOpen, Total: 1000, Count: 4, Split: "random",
			OpensAt: now.Add(-time.Minute), ClosesAt: now.Add(time.Hour), Funding: "platform", Shards: 1},
		GrantedCount: 1, GrantedCents: 250, RemainingCount: 3, RemainingCents: 750, Now: now,
	}
	var statusErr, pageErr error
	e := &fakeEngine{
		status: func(id string) (*hongbao.Status, error) { return st, statusErr },
		close:  func(id string) (*hongbao.Status, error) { return st, statusErr },
		page:   func() ([]string, int, error) { return []string{"c1"}, 1, pageErr },
	}
	set := &fakeSettlement{backlog: settle.Backlog{Lag: 2, Pending: 1, Dead: 4}, redriven: 4}
	ts := newFakeServer(t, e, set)
	admin := string(adminKey)
	backlog := map[string]any{"lag_entries": 2.0, "pending_entries": 1.0, "dead_entries": 4.0}

	r := ts.do(t, "GET", "/v1/campaigns/c1", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	body := r.json(t)
	require.Equal(t, "c1", body["id"])
	require.Equal(t, "7.50", body["remaining"])
	require.Equal(t, backlog, body["settlement"])

	r = ts.do(t, "POST", "/v1/campaigns/c1/close", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "close c1", e.last())
	require.Equal(t, backlog, r.json(t)["settlement"])

	r = ts.do(t, "GET", "/v1/campaigns", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	list := r.json(t)
	require.Equal(t, false, list["more"])
	require.Len(t, list["campaigns"], 1)
	require.Equal(t, backlog, list["campaigns"].([]any)[0].(map[string]any)["settlement"])

	r = ts.do(t, "POST", "/v1/campaigns/c1/redrive", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]any{"campaign": "c1", "redriven_entries": 4.0}, r.json(t))

	for _, tc := range errorCases {
		statusErr = fmt.Errorf("hongbao: status c1: %w", tc.err)
		checkError(t, ts.do(t, "GET", "/v1/campaigns/c1", admin, ""), tc.status, tc.code, tc.retry)
		checkError(t, ts.do(t, "POST", "/v1/campaigns/c1/close", admin, ""), tc.status, tc.code, tc.retry)
	}
	statusErr = nil
	// Settlement's errors: a campaign gone since the engine's read is not
	// found; anything else is internal.
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("%w: c1", settle.ErrNoCampaign), http.StatusNotFound, "not_found"},
		{errors.New("settle: redrive c1: the store's own words"), http.StatusInternalServerError, "internal"},
	} {
		set.err = tc.err
		checkError(t, ts.do(t, "GET", "/v1/campaigns/c1", admin, ""), tc.status, tc.code, "")
		checkError(t, ts.do(t, "POST", "/v1/campaigns/c1/redrive", admin, ""), tc.status, tc.code, "")
	}
	set.err = nil
	pageErr = hongbao.ErrBusy
	checkError(t, ts.do(t, "GET", "/v1/campaigns", admin, ""), http.StatusServiceUnavailable, "busy", "2")
	checkError(t, ts.do(t, "GET", "/v1/campaigns", token(t, "alice"), ""), http.StatusUnauthorized, "unauthorized", "")
}

// TestConfigNeedsSettlement: a server without a Settlement, or whose
// engine is no Store and no Store is given, is refused.
func TestConfigNeedsSettlement(t *testing.T) {
	t.Parallel()
	base := httpapi.Config{UserSecrets: []httpapi.Secret{userSecret}, AdminKeys: [][]byte{adminKey}}
	c := base
	c.Engine = &fakeEngine{}
	_, err := httpapi.New(c)
	require.ErrorContains(t, err, "Config.Discounts is required")
	c.Discounts = fakeDiscounts{f: &fakeEngine{}}
	_, err = httpapi.New(c)
	require.ErrorContains(t, err, "Config.Settlement is required")
	c.Settlement = &fakeSettlement{}
	_, err = httpapi.New(c)
	require.ErrorContains(t, err, "Config.Store is required")
	c.Store = fakeStore{}
	_, err = httpapi.New(c)
	require.NoError(t, err)
}
