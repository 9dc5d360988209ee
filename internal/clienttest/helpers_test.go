package clienttest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var (
	userSecret = httpapi.Secret{KID: "k1", Key: []byte("client-test-user-secret-0123456789ab")}
	adminKey   = "client-test-admin-key-0123456789abcdef"
	paymentKey = "client-test-payment-key-0123456789abcd"
	gatewayKey = "client-test-gateway-key-0123456789abcd"
)

// service is a real serve handler (real Redis, SQLite ledger) behind a
// real HTTP listener, with a fault hook in front of it.
type service struct {
	URL    string
	Engine *hongbao.Engine
	fault  *faults
	hs     *httptest.Server
}

// newService starts the API on the shared test Redis.
func newService(t *testing.T) *service {
	t.Helper()
	return newServiceWith(t, nil)
}

// newServiceWith is newService with the handler's configuration changed
// by with, when not nil.
func newServiceWith(t *testing.T, with func(*httpapi.Config)) *service {
	t.Helper()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	cfg := httpapi.Config{
		Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""),
		UserSecrets: []httpapi.Secret{userSecret},
		AdminKeys:   [][]byte{[]byte(adminKey)},
		PaymentKeys: [][]byte{[]byte(paymentKey)},
		GatewayKeys: [][]byte{[]byte(gatewayKey)},
		Ready:       map[string]func(context.Context) error{"ledger": l.Ping},
		UserRate:    -1, IPRate: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if with != nil {
		with(&cfg)
	}
	s, err := httpapi.New(cfg)
	require.NoError(t, err)
	f := &faults{next: s, hits: map[string]int{}}
	hs := httptest.NewUnstartedServer(f)
	// HTTP/1.1 and, as serve, HTTP/2 with prior knowledge (h2c), which
	// gRPC and the Connect streams speak.
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close)
	return &service{URL: hs.URL, Engine: eng, fault: f, hs: hs}
}

// faults answers chosen requests itself before the service sees them, and
// counts the requests that reach the listener, by "METHOD path".
type faults struct {
	next http.Handler
	mu   sync.Mutex
	hits map[string]int
	// answer, when set, may answer a request instead of the service; n
	// is the request's number on its route, from 1.
	answer func(w http.ResponseWriter, r *http.Request, n int) bool
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	k := r.Method + " " + r.URL.Path
	f.hits[k]++
	n, answer, next := f.hits[k], f.answer, f.next
	f.mu.Unlock()
	if answer != nil && answer(w, r, n) {
		return
	}
	next.ServeHTTP(w, r)
}

// count is how many requests reached the listener whose route ends with
// suffix.
func (f *faults) count(suffix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.hits {
		if strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}

func (f *faults) set(a func(w http.ResponseWriter, r *http.Request, n int) bool) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

// dropFirst is an http.RoundTripper that delivers every request but
// loses the reply of the first one whose path ends with suffix: the
// service did the work, the caller hears a cut connection.
type dropFirst struct {
	next    http.RoundTripper
	suffix  string
	mu      sync.Mutex
	dropped bool
}

func (d *dropFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := d.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, d.suffix) {
		return res, err
	}
	d.mu.Lock()
	drop := !d.dropped
	d.dropped = true
	d.mu.Unlock()
	if !drop {
		return res, nil
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return nil, io.ErrUnexpectedEOF
}

// newClient is a client of svc with credential token, over rt when not
// nil, whose every reply is checked against openapi.json. The retries
// start fast, so the tests do.
func newClient(t *testing.T, svc *service, token string, rt http.RoundTripper) *client.Client {
	t.Helper()
	return newClientOver(t, svc, token, rt, client.JSON)
}

// newClientOver is newClient speaking protocol p; under Connect and GRPC
// its transport speaks h2c.
func newClientOver(t *testing.T, svc *service, token string, rt http.RoundTripper, p client.Protocol) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	if p != client.JSON {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	if rt == nil {
		rt = tr
	}
	if d, ok := rt.(*dropFirst); ok && d.next == nil {
		d.next = tr
	}
	c, err := client.New(svc.URL, client.Options{
		Token:      token,
		HTTPClient: &http.Client{Transport: openapitest.Transport(t, rt), Timeout: 10 * time.Second},
		Retry:      client.Retry{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
		Protocol:   p,
	})
	require.NoError(t, err)
	return c
}

func userToken(t *testing.T, user string) string {
	t.Helper()
	tok, err := httpapi.MintToken(userSecret, user, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}
