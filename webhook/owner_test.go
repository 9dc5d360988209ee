package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// TestWireFormat pins every body byte for byte: without an owner as the
// sink has always sent them, with one the "owner" field after the
// campaign and nothing else changed.
func TestWireFormat(t *testing.T) {
	t.Parallel()
	const name = "wallet:acme"
	tests := []struct {
		name  string
		owner bool
		send  func(ctx context.Context, s *Sink) error
		want  string
	}{
		{"fund", false, func(ctx context.Context, s *Sink) error {
			return s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 100000})
		}, `{"type":"fund","campaign":"c1","funding":"acme","total_cents":100000,"amount":"1000.00","idempotency_key":"c1/fund"}`},
		{"grants", false, func(ctx context.Context, s *Sink) error {
			_, err := s.ApplyGrants(ctx, "c1", testGrants()[:2])
			return err
		}, `{"type":"grants","campaign":"c1","grants":[` +
			`{"idempotency_key":"c1/1","campaign":"c1","seq":1,"user":"alice","cents":710,"amount":"7.10"},` +
			`{"idempotency_key":"c1/2","campaign":"c1","seq":2,"user":"bob","cents":5,"amount":"0.05"}]}`},
		{"refund", false, func(ctx context.Context, s *Sink) error {
			return s.Refund(ctx, "c1", 710)
		}, `{"type":"refund","campaign":"c1","cents":710,"amount":"7.10","idempotency_key":"c1/refund"}`},
		{"totals", false, func(ctx context.Context, s *Sink) error {
			_, err := s.Totals(ctx, "c1")
			return err
		}, `{"type":"totals","campaign":"c1"}`},
		{"fund with owner", true, func(ctx context.Context, s *Sink) error {
			return s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 100000})
		}, `{"type":"fund","campaign":"c1","owner":"wallet:acme","funding":"acme","total_cents":100000,"amount":"1000.00","idempotency_key":"c1/fund"}`},
		{"grants with owner", true, func(ctx context.Context, s *Sink) error {
			_, err := s.ApplyGrants(ctx, "c1", testGrants()[:1])
			return err
		}, `{"type":"grants","campaign":"c1","owner":"wallet:acme","grants":[` +
			`{"idempotency_key":"c1/1","campaign":"c1","seq":1,"user":"alice","cents":710,"amount":"7.10"}]}`},
		{"refund with owner", true, func(ctx context.Context, s *Sink) error {
			return s.Refund(ctx, "c1", 0)
		}, `{"type":"refund","campaign":"c1","owner":"wallet:acme","cents":0,"amount":"0.00","idempotency_key":"c1/refund"}`},
		{"totals with owner", true, func(ctx context.Context, s *Sink) error {
			_, err := s.Totals(ctx, "c1")
			return err
		}, `{"type":"totals","campaign":"c1","owner":"wallet:acme"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, `{"campaign":"c1"}`) // a totals reply; no conflicts to the others
			})
			s := newSink(t, h.srv.URL, func(c *Config) { c.Name = name })
			ctx := t.Context()
			if tc.owner {
				ctx = ledger.WithOwner(ctx, name)
			}
			require.NoError(t, tc.send(ctx, s))
			reqs := h.requests()
			require.Len(t, reqs, 1)
			require.NoError(t, reqs[0].verify)
			require.Equal(t, tc.want, string(reqs[0].body))
		})
	}
}

// TestForeignOwnerSendsNothing: a call whose ctx carries another owner
// than the sink's name is refused with a *ledger.ForeignError before
// anything is sent, and is no outage.
func TestForeignOwnerSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(int, http.ResponseWriter, *http.Request) {})
	s := newSink(t, h.srv.URL, func(c *Config) { c.Name = "wallet:acme" })
	ctx := ledger.WithOwner(t.Context(), "ledger:other")
	calls := []struct {
		name string
		call func() error
	}{
		{"fund", func() error { return s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 1}) }},
		{"grants", func() error { _, err := s.ApplyGrants(ctx, "c1", testGrants()); return err }},
		{"empty grants", func() error { _, err := s.ApplyGrants(ctx, "c1", nil); return err }},
		{"refund", func() error { return s.Refund(ctx, "c1", 1) }},
		{"totals", func() error { _, err := s.Totals(ctx, "c1"); return err }},
	}
	for _, c := range calls {
		err := c.call()
		require.ErrorIs(t, err, ledger.ErrForeign, c.name)
		var fe *ledger.ForeignError
		require.ErrorAs(t, err, &fe, c.name)
		require.Equal(t, ledger.ForeignError{Campaign: "c1", Owner: "ledger:other", Ledger: "wallet:acme"}, *fe, c.name)
		require.NoError(t, s.Ping(t.Context()), "%s: not an outage", c.name)
	}
	require.Empty(t, h.requests())
}

// TestName: Config.Name defaults to one derived from the URL, without
// its secrets; an explicit one is kept; a bad one is ErrConfig.
func TestName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, cfgName string
		want               string // "" for ErrConfig
	}{
		{name: "derived", url: "https://wallet.example/hongbao", want: "webhook:https://wallet.example/hongbao"},
		{name: "port kept", url: "http://127.0.0.1:8080/hooks", want: "webhook:http://127.0.0.1:8080/hooks"},
		{name: "no path", url: "https://wallet.example", want: "webhook:https://wallet.example"},
		{name: "secrets left out", url: "https://user:pw@Wallet.Example:8443/a/b?token=t#frag", want: "webhook:https://wallet.example:8443/a/b"},
		{name: "scheme and host in lower case", url: "HTTPS://WALLET.example/Path", want: "webhook:https://wallet.example/Path"},
		{name: "escaped path", url: "https://wallet.example/a%20b", want: "webhook:https://wallet.example/a%20b"},
		{name: "explicit", url: "https://wallet.example/x", cfgName: "wallet:acme-prod", want: "wallet:acme-prod"},
		{name: "unicode", url: "https://wallet.example/x", cfgName: "钱包:prod", want: "钱包:prod"},
		{name: "longest", url: "https://wallet.example/x", cfgName: strings.Repeat("n", MaxNameLen), want: strings.Repeat("n", MaxNameLen)},
		{name: "too long", url: "https://wallet.example/x", cfgName: strings.Repeat("n", MaxNameLen+1)},
		{name: "derived too long", url: "https://wallet.example/" + strings.Repeat("p", MaxNameLen)},
		{name: "space", url: "https://wallet.example/x", cfgName: "wallet acme"},
		{name: "tab", url: "https://wallet.example/x", cfgName: "wallet\tacme"},
		{name: "newline", url: "https://wallet.example/x", cfgName: "wallet\n"},
		{name: "control", url: "https://wallet.example/x", cfgName: "wallet\x00"},
		{name: "no-break space", url: "https://wallet.example/x", cfgName: "wallet\u00a0acme"},
		{name: "not UTF-8", url: "https://wallet.example/x", cfgName: "wallet\xff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Config{URL: tc.url, Secret: testSecret, Name: tc.cfgName})
			if tc.want == "" {
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			got, err := s.Identity(t.Context())
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if tc.cfgName == "" {
				d, err := DefaultName(tc.url)
				require.NoError(t, err)
				require.Equal(t, tc.want, d)
			}
		})
	}
	_, err := DefaultName("/relative")
	require.ErrorIs(t, err, ErrConfig)
}

// TestTotals: the totals event asks, the reply is read as ledger.Totals,
// a reply that is not a TotalsReply for the campaign is ErrReply, and
// every call is a new request.
func TestTotals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		reply  string
		want   ledger.Totals
		err    error
	}{
		{name: "settled", reply: `{"campaign":"c1","funding":"acme","funded_cents":1000,"grant_count":3,"grant_cents":900,"refunded_cents":100,"refunded":true}`,
			want: ledger.Totals{Funded: 1000, Funding: "acme", GrantCount: 3, GrantCents: 900, Refunded: 100, RefundDone: true}},
		{name: "live", reply: `{"campaign":"c1","funded_cents":1000,"grant_count":1,"grant_cents":400,"refunded_cents":0,"refunded":false}`,
			want: ledger.Totals{Funded: 1000, GrantCount: 1, GrantCents: 400, Escrow: 600}},
		{name: "unknown campaign", reply: `{"campaign":"c1"}`},
		{name: "extra fields", reply: `{"campaign":"c1","funded_cents":5,"currency":"CNY"}`, want: ledger.Totals{Funded: 5, Escrow: 5}},
		{name: "plain OK", reply: "OK", err: ErrReply},
		{name: "empty", reply: "", err: ErrReply},
		{name: "no campaign", reply: `{"funded_cents":1000}`, err: ErrReply},
		{name: "another campaign", reply: `{"campaign":"c2"}`, err: ErrReply},
		{name: "negative", reply: `{"campaign":"c1","grant_cents":-1}`, err: ErrReply},
		{name: "fractional cents", reply: `{"campaign":"c1","grant_cents":1.5}`, err: ErrReply},
		{name: "refund cents without refund", reply: `{"campaign":"c1","refunded_cents":3}`, err: ErrReply},
		{name: "overflow", reply: `{"campaign":"c1","grant_cents":9223372036854775807,"refunded_cents":1,"refunded":true}`, err: ErrReply},
		{name: "refused", status: http.StatusBadRequest, reply: "unknown event type", err: ErrRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				_, _ = io.WriteString(w, tc.reply)
			})
			s := newSink(t, h.srv.URL, nil)
			got, err := s.Totals(t.Context(), "c1")
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.NotErrorIs(t, err, ledger.ErrInvalid, "a totals refusal is no grant's fault")
				require.Len(t, h.requests(), 1, "not retried")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	h := newHost(t, func(_ int, w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"campaign":"c1"}`) })
	s := newSink(t, h.srv.URL, nil)
	for range 2 {
		_, err := s.Totals(t.Context(), "c1")
		require.NoError(t, err)
	}
	reqs := h.requests()
	require.Len(t, reqs, 2)
	k0, k1 := reqs[0].header.Get(HeaderIdempotencyKey), reqs[1].header.Get(HeaderIdempotencyKey)
	require.True(t, strings.HasPrefix(k0, "c1/totals/"), k0)
	require.NotEqual(t, k0, k1, "each question is a new request, never answered from a cache")
	_, err := s.Totals(t.Context(), "")
	require.ErrorIs(t, err, ledger.ErrInvalid)
}

// TestReadEvent: a host reads, verifies and decodes a request in one
// call, and each way a request can be wrong has its own error.
func TestReadEvent(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_767_225_600, 0)
	ts := now.Unix()
	fund := []byte(`{"type":"fund","campaign":"c1","owner":"wallet:acme","funding":"acme","total_cents":100,"amount":"1.00","idempotency_key":"c1/fund"}`)
	signed := func(body []byte, at int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set(HeaderTimestamp, strconv.FormatInt(at, 10))
		r.Header.Set(HeaderSignature, Sign(testSecret, at, body))
		r.Header.Set(HeaderIdempotencyKey, "c1/fund")
		return r
	}
	tests := []struct {
		name string
		req  func() *http.Request
		want error
	}{
		{"valid", func() *http.Request { return signed(fund, ts) }, nil},
		{"skew within the window", func() *http.Request { return signed(fund, ts+299) }, nil},
		{"expired", func() *http.Request { return signed(fund, ts-301) }, ErrExpired},
		{"tampered", func() *http.Request {
			r := signed(fund, ts)
			r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(fund, []byte("100"), []byte("900"), 1)))
			return r
		}, ErrSignature},
		{"unsigned", func() *http.Request { return httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(fund)) }, ErrSignature},
		{"signed, not JSON", func() *http.Request { return signed([]byte("hello"), ts) }, ErrRequest},
		{"signed, no type", func() *http.Request { return signed([]byte(`{"campaign":"c1"}`), ts) }, ErrRequest},
		{"signed, no campaign", func() *http.Request { return signed([]byte(`{"type":"fund"}`), ts) }, ErrRequest},
		{"above the host's bound", func() *http.Request {
			r := signed(fund, ts)
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 16)
			return r
		}, ErrRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := ReadEvent(testSecret, tc.req(), 0, now)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				for _, other := range []error{ErrSignature, ErrExpired, ErrRequest} {
					if other != tc.want {
						require.NotErrorIs(t, err, other)
					}
				}
				require.Nil(t, ev)
				return
			}
			require.NoError(t, err)
			require.Equal(t, EventFund, ev.Type)
			require.Equal(t, "c1", ev.Campaign)
			require.Equal(t, "wallet:acme", ev.Owner)
			require.Equal(t, "c1/fund", ev.IdempotencyKey)
			var f FundEvent
			require.NoError(t, ev.Decode(&f))
			require.Equal(t, FundEvent{Type: EventFund, Campaign: "c1", Owner: "wallet:acme", Funding: "acme",
				TotalCents: 100, Amount: "1.00", IdempotencyKey: "c1/fund"}, f)
		})
	}
	ev, err := ReadEvent(testSecret, signed([]byte(`{"type":"grants","campaign":"c1","grants":"c1/1"}`), ts), 0, now)
	require.NoError(t, err, "the envelope is fine")
	var g GrantsEvent
	require.ErrorIs(t, ev.Decode(&g), ErrRequest, "its grants are not")
}
