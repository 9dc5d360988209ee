package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var (
	userSecret  = httpapi.Secret{KID: "k1", Key: []byte("user-secret-one-0123456789abcdefghij")}
	userSecret2 = httpapi.Secret{KID: "k2", Key: []byte("user-secret-two-0123456789abcdefghij")}
	adminKey    = []byte("admin-key-0123456789abcdefghijklmnop")
	paymentKey  = []byte("payment-key-0123456789abcdefghijklmn")
)

type testServer struct {
	URL    string
	Redis  *testenv.Redis
	Engine *hongbao.Engine
	Ledger ledger.Ledger
	Server *httpapi.Server
	Client *http.Client
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer serves the API over real HTTP on the shared real Redis.
func newTestServer(t testing.TB, mod func(*httpapi.Config)) *testServer {
	t.Helper()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	l, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	cfg := httpapi.Config{
		Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""),
		UserSecrets: []httpapi.Secret{userSecret, userSecret2},
		AdminKeys:   [][]byte{adminKey},
		PaymentKeys: [][]byte{paymentKey},
		Degraded:    map[string]func(context.Context) error{"ledger": l.Ping}, // as serve has it
		Logger:      quiet(),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := httpapi.New(cfg)
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(s)
	// As serve has it: HTTP/1.1 and, for gRPC clients, HTTP/2 with prior
	// knowledge (h2c).
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	t.Cleanup(hs.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &testServer{URL: hs.URL, Redis: r, Engine: eng, Ledger: l, Server: s, Client: &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 30 * time.Second}}
}

func token(t testing.TB, user string) string {
	t.Helper()
	tok, err := httpapi.MintToken(userSecret, user, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body %s", r.Body)
	return m
}

// errorCode checks the error shape and returns its code.
func (r reply) errorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&e), "not the error shape: %s", r.Body)
	require.NotEmpty(t, e.Error.Code, "body %s", r.Body)
	require.NotEmpty(t, e.Error.Message, "body %s", r.Body)
	return e.Error.Code
}

func (ts *testServer) do(t testing.TB, method, path, auth string, body string, hdr ...string) reply {
	t.Helper()
	r, err := ts.try(method, path, auth, body, hdr...)
	require.NoError(t, err)
	return r
}

// try is do without assertions, for goroutines other than the test's.
// Every reply of ts.Client is checked against openapi.json by its
// transport (openapitest.Transport), which reports a mismatch to the test.
func (ts *testServer) try(method, path, auth string, body string, hdr ...string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		return reply{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := ts.Client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// create makes a campaign as admin and returns its id.
func (ts *testServer) create(t testing.TB, body string) string {
	t.Helper()
	r := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id, _ := r.json(t)["id"].(string)
	require.NotEmpty(t, id)
	return id
}
