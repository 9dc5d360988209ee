package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// The settle worker's Sink, spelled out so this package's tests do not
// depend on package settle.
var _ interface {
	Fund(ctx context.Context, c ledger.Campaign) error
	ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error)
	Refund(ctx context.Context, campaign string, cents int64) error
	Ping(ctx context.Context) error
} = (*Sink)(nil)

var (
	testSecret = bytes.Repeat([]byte("k"), 32)
	// epoch is where the test clock starts; hostNow is the host's idea of
	// now, ahead of every timestamp a test signs but within testWindow.
	epoch      = time.Unix(1_767_225_600, 0)
	hostNow    = epoch.Add(30 * time.Second)
	testWindow = time.Minute
)

// tickClock returns a clock that moves one second per reading, so every
// attempt is signed with another timestamp.
func tickClock() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return epoch.Add(time.Duration(n.Add(1)-1) * time.Second) }
}

// seen is one request as the host received it.
type seen struct {
	n      int // 1-based attempt number over the host's life
	method string
	path   string
	header http.Header
	body   []byte
	verify error
}

// host is a local HTTP server that records every request, verifies its
// signature and answers with respond.
type host struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []seen
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newHost(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *host {
	t.Helper()
	h := &host{respond: respond}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		n := len(h.reqs) + 1
		h.reqs = append(h.reqs, seen{
			n: n, method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body,
			verify: Verify(testSecret, r, body, testWindow, hostNow),
		})
		h.mu.Unlock()
		h.respond(n, w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *host) requests() []seen {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seen(nil), h.reqs...)
}

// newSink returns a Sink for url with fast backoffs and the tick clock;
// mod may change the config first.
func newSink(t *testing.T, url string, mod func(*Config)) *Sink {
	t.Helper()
	cfg := Config{
		URL: url, Secret: testSecret, Clock: tickClock(),
		Client:      &http.Client{Timeout: 2 * time.Second},
		MaxAttempts: 8, BaseBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

// recordWaits makes s skip its pauses and returns what they would have
// been.
func recordWaits(s *Sink) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	s.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
}

func testGrants() []ledger.Grant {
	return []ledger.Grant{
		{Campaign: "c1", Seq: 1, User: "alice", Cents: 710},
		{Campaign: "c1", Seq: 2, User: "bob", Cents: 5},
		{Seq: 3, User: "carol", Cents: 1285}, // empty campaign: the batch's
	}
}

func TestApplyGrantsFailsTimesOutThenSucceeds(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1, 2:
			http.Error(w, "database is on fire", http.StatusInternalServerError)
		case 3:
			// Longer than the client's timeout; ends when it hangs up.
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			_, _ = io.WriteString(w, "OK")
		}
	})
	s := newSink(t, h.srv.URL, func(c *Config) { c.Client = &http.Client{Timeout: 100 * time.Millisecond} })

	res, err := s.ApplyGrants(t.Context(), "c1", testGrants())
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 3, InsertedCents: 710 + 5 + 1285}, res)
	require.NoError(t, s.Ping(t.Context()), "delivered: not an outage")

	reqs := h.requests()
	require.Len(t, reqs, 4)
	sigs := map[string]bool{}
	for _, r := range reqs {
		require.NoError(t, r.verify, "attempt %d", r.n)
		require.Equal(t, http.MethodPost, r.method)
		require.Equal(t, reqs[0].body, r.body, "attempt %d: same body", r.n)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Equal(t, reqs[0].header.Get(HeaderIdempotencyKey), r.header.Get(HeaderIdempotencyKey))
		require.Regexp(t, `^v1=[0-9a-f]{64}$`, r.header.Get(HeaderSignature))
		sigs[r.header.Get(HeaderSignature)] = true
	}
	require.Len(t, sigs, 4, "each attempt is signed afresh")
	require.Regexp(t, `^c1/grants/1-3-[0-9a-f]{8}$`, reqs[0].header.Get(HeaderIdempotencyKey))

	var got map[string]any
	require.NoError(t, json.Unmarshal(reqs[0].body, &got))
	require.Equal(t, map[string]any{
		"type": "grants", "campaign": "c1",
		"grants": []any{
			map[string]any{"idempotency_key": "c1/1", "campaign": "c1", "seq": 1.0, "user": "alice", "cents": 710.0, "amount": "7.10"},
			map[string]any{"idempotency_key": "c1/2", "campaign": "c1", "seq": 2.0, "user": "bob", "cents": 5.0, "amount": "0.05"},
			map[string]any{"idempotency_key": "c1/3", "campaign": "c1", "seq": 3.0, "user": "carol", "cents": 1285.0, "amount": "12.85"},
		},
	}, got)
}

func TestStatusClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status   int
		attempts int
		want     error
	}{
		{http.StatusBadRequest, 1, ErrRejected},
		{http.StatusUnauthorized, 1, ErrRejected},
		{http.StatusNotFound, 1, ErrRejected},
		{http.StatusConflict, 1, ErrRejected},
		{http.StatusUnprocessableEntity, 1, ErrRejected},
		{http.StatusRequestTimeout, 3, ErrUnavailable},
		{http.StatusTooManyRequests, 3, ErrUnavailable},
		{http.StatusInternalServerError, 3, ErrUnavailable},
		{http.StatusBadGateway, 3, ErrUnavailable},
		{http.StatusServiceUnavailable, 3, ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			var healthy atomic.Bool
			h := newHost(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if healthy.Load() {
					return // 200
				}
				http.Error(w, "no: "+strings.Repeat("x", 1000), tc.status)
			})
			s := newSink(t, h.srv.URL, func(c *Config) { c.MaxAttempts = 3 })
			waits := recordWaits(s)

			_, err := s.ApplyGrants(t.Context(), "c1", testGrants())
			require.ErrorIs(t, err, tc.want)
			require.Len(t, h.requests(), tc.attempts)
			require.Len(t, waits(), tc.attempts-1)

			if tc.want == ErrRejected {
				var rej *RejectedError
				require.ErrorAs(t, err, &rej)
				require.Equal(t, tc.status, rej.Status)
				require.Equal(t, "grants", rej.Event)
				require.True(t, strings.HasPrefix(rej.Body, "no: xxx"), rej.Body)
				require.LessOrEqual(t, len(rej.Body), maxExcerpt)
				require.NotErrorIs(t, err, ledger.ErrConflict, "only fund and refund map 409")
				require.NoError(t, s.Ping(t.Context()), "a refusal is not an outage")
				return
			}
			require.ErrorIs(t, s.Ping(t.Context()), ErrUnavailable, "an outage")
			healthy.Store(true)
			_, err = s.ApplyGrants(t.Context(), "c1", testGrants())
			require.NoError(t, err)
			require.NoError(t, s.Ping(t.Context()), "recovered")
		})
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	s, err := New(Config{URL: h.srv.URL, Secret: testSecret, Clock: tickClock()})
	require.NoError(t, err)
	err = s.Refund(t.Context(), "c1", 1)
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, http.StatusFound, rej.Status)
	require.Len(t, h.requests(), 1)
}

func TestNetworkErrorIsOutage(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(int, http.ResponseWriter, *http.Request) {})
	url := h.srv.URL
	h.srv.Close() // nothing listens there any more
	s := newSink(t, url, func(c *Config) { c.MaxAttempts = 2 })
	waits := recordWaits(s)

	err := s.Refund(t.Context(), "c1", 10)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Len(t, waits(), 1)
	require.ErrorIs(t, s.Ping(t.Context()), ErrUnavailable)

	// An invalid call afterwards is a refusal, not an outage.
	require.ErrorIs(t, s.Refund(t.Context(), "c1", -1), ledger.ErrInvalid)
	require.NoError(t, s.Ping(t.Context()))
}

func TestContextCancelStopsRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		cancelInWait  bool
		cancelInServe bool
	}{
		{name: "during the request", cancelInServe: true},
		{name: "during the backoff", cancelInWait: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			h := newHost(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tc.cancelInServe {
					cancel()
				}
				http.Error(w, "down", http.StatusServiceUnavailable)
			})
			// Backoffs of a minute: only the cancellation can end the call
			// in time.
			s := newSink(t, h.srv.URL, func(c *Config) { c.BaseBackoff, c.MaxBackoff = time.Minute, time.Minute })
			if tc.cancelInWait {
				s.wait = func(ctx context.Context, d time.Duration) error {
					cancel()
					return sleep(ctx, d)
				}
			}
			start := time.Now()
			_, err := s.ApplyGrants(ctx, "c1", testGrants())
			require.ErrorIs(t, err, context.Canceled)
			require.Less(t, time.Since(start), 10*time.Second)
			require.Len(t, h.requests(), 1)
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter string
		maxBackoff time.Duration
		want       time.Duration // -1: the jittered backoff
	}{
		{"seconds honoured", "2", 10 * time.Second, 2 * time.Second},
		{"seconds capped", "3600", time.Second, time.Second},
		{"huge capped", "99999999999999999", time.Second, time.Second},
		{"zero", "0", time.Second, 0},
		{"date honoured", epoch.Add(4 * time.Second).UTC().Format(http.TimeFormat), 10 * time.Second, 3 * time.Second},
		{"date in the past", epoch.Add(-time.Hour).UTC().Format(http.TimeFormat), 10 * time.Second, 0},
		{"absent", "", time.Second, -1},
		{"garbage", "soon", time.Second, -1},
		{"negative", "-5", time.Second, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			base := 400 * time.Millisecond
			s := newSink(t, h.srv.URL, func(c *Config) { c.BaseBackoff, c.MaxBackoff = base, tc.maxBackoff })
			waits := recordWaits(s)

			_, err := s.ApplyGrants(t.Context(), "c1", testGrants())
			require.NoError(t, err)
			require.Len(t, h.requests(), 2)
			w := waits()
			require.Len(t, w, 1)
			if tc.want >= 0 {
				require.Equal(t, tc.want, w[0])
			} else {
				require.GreaterOrEqual(t, w[0], base/2)
				require.LessOrEqual(t, w[0], base)
			}
		})
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	t.Parallel()
	s := newSink(t, "http://127.0.0.1:1/", func(c *Config) {
		c.BaseBackoff, c.MaxBackoff = 100*time.Millisecond, 5*time.Second
	})
	tests := []struct {
		attempt int
		full    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{6, 3200 * time.Millisecond},
		{7, 5 * time.Second},
		{100, 5 * time.Second},
	}
	for _, tc := range tests {
		for range 50 {
			d := s.backoff(tc.attempt, -1)
			require.GreaterOrEqual(t, d, tc.full/2, "attempt %d", tc.attempt)
			require.LessOrEqual(t, d, tc.full, "attempt %d", tc.attempt)
		}
	}
}

func TestConflictsReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply string
		want  ledger.ApplyResult
		err   error
	}{
		{
			name: "conflicts",
			reply: `{"conflicts":[
				{"idempotency_key":"c1/2","reason":"user_has_other","existing":{"seq":9,"user":"bob","cents":50}},
				{"idempotency_key":"c1/3"},
				{"idempotency_key":"c2/1","reason":"packet_taken"},
				{"idempotency_key":"c1/2","reason":"packet_taken"}]}`,
			want: ledger.ApplyResult{
				Inserted: 1, InsertedCents: 710,
				Conflicts: []ledger.Conflict{
					{
						Grant:    ledger.Grant{Campaign: "c1", Seq: 2, User: "bob", Cents: 5},
						Kind:     ledger.UserHasOther,
						Existing: ledger.Grant{Campaign: "c1", Seq: 9, User: "bob", Cents: 50},
					},
					{Grant: ledger.Grant{Campaign: "c1", Seq: 3, User: "carol", Cents: 1285}, Kind: ledger.PacketTaken},
				},
			},
		},
		{name: "no conflicts", reply: `{"conflicts":[]}`, want: ledger.ApplyResult{Inserted: 3, InsertedCents: 2000}},
		{name: "other json", reply: `{"ok":true}`, want: ledger.ApplyResult{Inserted: 3, InsertedCents: 2000}},
		{name: "plain text", reply: "OK\n", want: ledger.ApplyResult{Inserted: 3, InsertedCents: 2000}},
		{name: "empty", reply: "", want: ledger.ApplyResult{Inserted: 3, InsertedCents: 2000}},
		{name: "malformed json", reply: `{"conflicts":[{`, err: ErrReply},
		{name: "wrong shape", reply: `{"conflicts":"c1/2"}`, err: ErrReply},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.reply)
			})
			s := newSink(t, h.srv.URL, nil)
			res, err := s.ApplyGrants(t.Context(), "c1", testGrants())
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.NoError(t, s.Ping(t.Context()), "the host answered: not an outage")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, res)
			require.Len(t, h.requests(), 1)
		})
	}
}

func TestFundAndRefundBodies(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(int, http.ResponseWriter, *http.Request) {})
	s := newSink(t, h.srv.URL, nil)

	require.NoError(t, s.Fund(t.Context(), ledger.Campaign{ID: "c1", Funding: "acme", Total: 100000}))
	require.NoError(t, s.Refund(t.Context(), "c1", 0))
	reqs := h.requests()
	require.Len(t, reqs, 2)

	tests := []struct {
		key  string
		body map[string]any
	}{
		{"c1/fund", map[string]any{
			"type": "fund", "campaign": "c1", "funding": "acme", "total_cents": 100000.0,
			"amount": "1000.00", "idempotency_key": "c1/fund",
		}},
		{"c1/refund", map[string]any{
			"type": "refund", "campaign": "c1", "cents": 0.0, "amount": "0.00", "idempotency_key": "c1/refund",
		}},
	}
	for i, tc := range tests {
		require.NoError(t, reqs[i].verify)
		require.Equal(t, tc.key, reqs[i].header.Get(HeaderIdempotencyKey))
		var got map[string]any
		require.NoError(t, json.Unmarshal(reqs[i].body, &got))
		require.Equal(t, tc.body, got)
	}
}

func TestConflictOnFundOrRefundIsLedgerConflict(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "stored with another total", http.StatusConflict)
	})
	s := newSink(t, h.srv.URL, nil)
	for _, err := range []error{
		s.Fund(t.Context(), ledger.Campaign{ID: "c1", Funding: "acme", Total: 100}),
		s.Refund(t.Context(), "c1", 40),
	} {
		require.ErrorIs(t, err, ErrRejected)
		require.ErrorIs(t, err, ledger.ErrConflict)
	}
	require.Len(t, h.requests(), 2, "no retries")
}

func TestInvalidArgumentsSendNothing(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(int, http.ResponseWriter, *http.Request) {})
	s := newSink(t, h.srv.URL, nil)
	ctx := t.Context()
	batches := []struct {
		campaign string
		grants   []ledger.Grant
	}{
		{"", testGrants()},
		{"c1", []ledger.Grant{{Campaign: "c2", Seq: 1, User: "a", Cents: 1}}},
		{"c1", []ledger.Grant{{Seq: 1, Cents: 1}}},
		{"c1", []ledger.Grant{{Seq: -1, User: "a", Cents: 1}}},
		{"c1", []ledger.Grant{{Seq: 1, User: "a", Cents: 0}}},
	}
	for _, b := range batches {
		_, err := s.ApplyGrants(ctx, b.campaign, b.grants)
		require.ErrorIs(t, err, ledger.ErrInvalid, "%+v", b)
	}
	require.ErrorIs(t, s.Fund(ctx, ledger.Campaign{ID: "c1", Total: 1}), ledger.ErrInvalid)
	require.ErrorIs(t, s.Fund(ctx, ledger.Campaign{Funding: "acme", Total: 1}), ledger.ErrInvalid)
	require.ErrorIs(t, s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: -1}), ledger.ErrInvalid)
	require.ErrorIs(t, s.Refund(ctx, "", 1), ledger.ErrInvalid)

	res, err := s.ApplyGrants(ctx, "c1", nil)
	require.NoError(t, err)
	require.Zero(t, res)
	require.Empty(t, h.requests())
}

func TestPingURL(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	h := newHost(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	s := newSink(t, h.srv.URL+"/events", func(c *Config) { c.PingURL = h.srv.URL + "/health" })

	require.ErrorIs(t, s.Ping(t.Context()), ErrUnavailable)
	up.Store(true)
	require.NoError(t, s.Ping(t.Context()))

	reqs := h.requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.Equal(t, http.MethodGet, r.method)
		require.Equal(t, "/health", r.path)
		require.NoError(t, r.verify, "signed over the empty body")
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"refund","campaign":"c1","cents":40}`)
	now := time.Unix(1_767_225_600, 0)
	ts := now.Unix()
	tests := []struct {
		name   string
		secret []byte
		body   []byte
		ts     string
		sig    string
		window time.Duration
		want   error
	}{
		{name: "valid", ts: fmt.Sprint(ts), sig: Sign(testSecret, ts, body)},
		{name: "tampered body", body: []byte(`{"type":"refund","campaign":"c1","cents":4000}`),
			ts: fmt.Sprint(ts), sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "wrong secret", secret: bytes.Repeat([]byte("x"), 32),
			ts: fmt.Sprint(ts), sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "timestamp moved", ts: fmt.Sprint(ts + 1), sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "old", ts: fmt.Sprint(ts - 301), sig: Sign(testSecret, ts-301, body), want: ErrExpired},
		{name: "old within a wider window", ts: fmt.Sprint(ts - 301), sig: Sign(testSecret, ts-301, body), window: time.Hour},
		{name: "old and forged", ts: fmt.Sprint(ts - 301), sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "future", ts: fmt.Sprint(ts + 301), sig: Sign(testSecret, ts+301, body), want: ErrExpired},
		{name: "skew within the window", ts: fmt.Sprint(ts + 299), sig: Sign(testSecret, ts+299, body)},
		{name: "missing timestamp", sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "malformed timestamp", ts: "yesterday", sig: Sign(testSecret, ts, body), want: ErrSignature},
		{name: "missing signature", ts: fmt.Sprint(ts), want: ErrSignature},
		{name: "not hex", ts: fmt.Sprint(ts), sig: "v1=zz", want: ErrSignature},
		{name: "other scheme only", ts: fmt.Sprint(ts), sig: strings.Replace(Sign(testSecret, ts, body), "v1=", "v0=", 1), want: ErrSignature},
		{name: "rotation: second of two", ts: fmt.Sprint(ts),
			sig: Sign([]byte("old-secret-old-secret-old-secret"), ts, body) + ", " + Sign(testSecret, ts, body)},
		{name: "empty secret", secret: []byte{}, ts: fmt.Sprint(ts), sig: Sign(nil, ts, body), want: ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if tc.ts != "" {
				r.Header.Set(HeaderTimestamp, tc.ts)
			}
			if tc.sig != "" {
				r.Header.Set(HeaderSignature, tc.sig)
			}
			secret, got := testSecret, body
			if tc.secret != nil {
				secret = tc.secret
			}
			if tc.body != nil {
				got = tc.body
			}
			err := Verify(secret, r, got, tc.window, now)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			other := map[error]error{ErrSignature: ErrExpired, ErrExpired: ErrSignature}[tc.want]
			require.NotErrorIs(t, err, other)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mod   func(*Config)
		field string // of the *ConfigError; "" when ok
	}{
		{name: "defaults", mod: func(*Config) {}},
		{name: "secret of 31 bytes", mod: func(c *Config) { c.Secret = c.Secret[:31] }, field: "Config.Secret"},
		{name: "no secret", mod: func(c *Config) { c.Secret = nil }, field: "Config.Secret"},
		{name: "no URL", mod: func(c *Config) { c.URL = "" }, field: "Config.URL"},
		{name: "relative URL", mod: func(c *Config) { c.URL = "/hooks" }, field: "Config.URL"},
		{name: "ftp URL", mod: func(c *Config) { c.URL = "ftp://127.0.0.1/x" }, field: "Config.URL"},
		{name: "bad PingURL", mod: func(c *Config) { c.PingURL = "health" }, field: "Config.PingURL"},
		{name: "good PingURL", mod: func(c *Config) { c.PingURL = "https://127.0.0.1/health" }},
		{name: "negative attempts", mod: func(c *Config) { c.MaxAttempts = -1 }, field: "Config.MaxAttempts"},
		{name: "base above max", mod: func(c *Config) { c.BaseBackoff = 10 * time.Second }, field: "Config.BaseBackoff"},
		{name: "negative base", mod: func(c *Config) { c.BaseBackoff = -time.Second }, field: "Config.BaseBackoff"},
		{name: "bad name", mod: func(c *Config) { c.Name = "a b" }, field: "Config.Name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{URL: "http://127.0.0.1:8080/hooks", Secret: bytes.Clone(testSecret)}
			tc.mod(&cfg)
			s, err := New(cfg)
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, 8, s.cfg.MaxAttempts)
				require.Equal(t, 100*time.Millisecond, s.cfg.BaseBackoff)
				require.Equal(t, 5*time.Second, s.cfg.MaxBackoff)
				require.Equal(t, 10*time.Second, s.cfg.Client.Timeout)
				return
			}
			require.ErrorIs(t, err, ErrConfig)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
			require.NotContains(t, err.Error(), string(testSecret), "a secret is never in the message")
			require.Nil(t, s)
		})
	}
	// A URL may carry a password: the message never shows it.
	_, err := New(Config{URL: "ftp://user:hunter2@wallet.example/x", Secret: testSecret})
	require.ErrorIs(t, err, ErrConfig)
	require.NotContains(t, err.Error(), "hunter2")
}

func TestSecretIsCopied(t *testing.T) {
	t.Parallel()
	secret := bytes.Clone(testSecret)
	s, err := New(Config{URL: "http://127.0.0.1:1/", Secret: secret})
	require.NoError(t, err)
	secret[0] = 'z'
	require.Equal(t, testSecret, s.cfg.Secret)
}

func TestGrantKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "c1/42", GrantKey("c1", 42))
}
