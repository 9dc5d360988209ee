// Package tsclient_test runs the TypeScript client's tests (npm test, on
// node's test runner) against a real server: the API of serve on a real
// listener (HTTP/1.1 and h2c, as serve has it), a real redis-server and a
// SQLite ledger. It creates the campaigns and mints the tokens the
// TypeScript tests use, then checks what they were answered against
// what the engine holds.
package tsclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var (
	userSecret = httpapi.Secret{KID: "k1", Key: []byte("ts-user-secret-0123456789abcdefghijkl")}
	adminKey   = "ts-admin-key-0123456789abcdefghijklmno"
	gatewayKey = "ts-gateway-key-0123456789abcdefghijklm"
	paymentKey = "ts-payment-key-0123456789abcdefghijklm"
)

// loseHeader names the requests whose answer the test's front drops
// once: the grab reaches the engine, the client is answered
// outcome_unknown with a wait of retryAfter, as when a reply is lost.
const (
	loseHeader = "X-Test-Lose-Answer"
	retryAfter = 300 * time.Millisecond
)

// campaigns are the campaigns of one protocol's tests (test/client.test.ts
// reads the same names).
type campaigns struct {
	Grab             string `json:"grab"`
	GrabTotalCents   int64  `json:"grabTotalCents"`
	Batch            string `json:"batch"`
	BatchTotalCents  int64  `json:"batchTotalCents"`
	Stream           string `json:"stream"`
	StreamCount      int64  `json:"streamCount"`
	StreamTotalCents int64  `json:"streamTotalCents"`
	Discount         string `json:"discount"`
}

type fixture struct {
	URL          string               `json:"url"`
	GatewayKey   string               `json:"gatewayKey"`
	PaymentKey   string               `json:"paymentKey"`
	Tokens       map[string]string    `json:"tokens"`
	LoseHeader   string               `json:"loseHeader"`
	RetryAfterMs int64                `json:"retryAfterMs"`
	Protocols    map[string]campaigns `json:"protocols"`
	Out          string               `json:"out"`
}

// answers is what the TypeScript tests write to fixture.Out.
type answers struct {
	UnavailableCodes []string `json:"unavailableCodes"`
	Grants           []struct {
		Protocol    string `json:"protocol"`
		CampaignID  string `json:"campaignId"`
		UserID      string `json:"userId"`
		PacketID    string `json:"packetId"`
		AmountCents string `json:"amountCents"`
		Amount      string `json:"amount"`
	} `json:"grants"`
	Discounts []struct {
		Protocol    string `json:"protocol"`
		CampaignID  string `json:"campaignId"`
		UserID      string `json:"userId"`
		OrderID     string `json:"orderId"`
		State       string `json:"state"`
		AmountCents string `json:"amountCents"`
		Amount      string `json:"amount"`
	} `json:"discounts"`
}

// TestTypeScriptClient builds clients/ts and runs its tests against a
// real server, then holds their answers to the engine: every packet the
// client was answered is the one the engine holds for that user, to the
// cent and in the decimal spelling; the campaigns' granted counts and
// cents are what the client saw; the confirmed discount is the engine's.
func TestTypeScriptClient(t *testing.T) {
	npm := needNode(t)
	srv := startServer(t)
	ctx := context.Background()

	fx := fixture{
		URL: srv.url, GatewayKey: gatewayKey, PaymentKey: paymentKey, Tokens: map[string]string{},
		LoseHeader: loseHeader, RetryAfterMs: retryAfter.Milliseconds(), Protocols: map[string]campaigns{},
		Out: filepath.Join(t.TempDir(), "answers.json"),
	}
	for _, u := range []string{"ann", "bob", "cy", "dee", "eve", "fay"} {
		tok, err := httpapi.MintToken(userSecret, u, time.Hour, time.Now())
		require.NoError(t, err)
		fx.Tokens[u] = tok
	}
	for _, p := range []string{"connect", "grpc"} {
		fx.Protocols[p] = campaigns{
			Grab: srv.create(t, "/v1/campaigns", `{"total":"10.00","count":5,"min":"0.01"}`), GrabTotalCents: 1000,
			Batch: srv.create(t, "/v1/campaigns", `{"total":"6.00","count":3,"min":"0.01"}`), BatchTotalCents: 600,
			Stream:      srv.create(t, "/v1/campaigns", `{"total":"400.00","count":200,"min":"0.01"}`),
			StreamCount: 200, StreamTotalCents: 40000,
			Discount: srv.create(t, "/v1/discounts", `{"budget":"100.00","quota":50,"min":"0.01","max":"5.00","per_user_count":3,"per_user_amount":"8.00","hold":"60s"}`),
		}
	}
	b, err := json.Marshal(fx)
	require.NoError(t, err)

	npmCI(t, npm)
	run(t, npm, nil, "run", "build")
	out := run(t, npm, []string{"HONGBAO_TS_FIXTURE=" + string(b)}, "test")
	t.Logf("npm test:\n%s", tail(out, 12))

	raw, err := os.ReadFile(fx.Out)
	require.NoError(t, err, "the TypeScript tests wrote no answers")
	var got answers
	require.NoError(t, json.Unmarshal(raw, &got))

	require.Equal(t, unavailableCodes(t), got.UnavailableCodes,
		"UNAVAILABLE_CODES of src/errors.ts are the unavailable rows of docs/service.md's table of codes")

	// Every packet the client was answered is the engine's, and the
	// client saw every packet of each campaign.
	type sum struct{ count, cents int64 }
	seen := map[string]*sum{}
	users := map[string]bool{}
	for _, g := range got.Grants {
		key := g.CampaignID + " " + g.UserID
		require.False(t, users[key], "%s recorded twice", key)
		users[key] = true
		held, err := srv.eng.Held(ctx, g.CampaignID, g.UserID)
		require.NoError(t, err, "%s: %s holds nothing", g.CampaignID, g.UserID)
		require.Equal(t, held.PacketID(), g.PacketID, key)
		require.Equal(t, strconv.FormatInt(held.Cents, 10), g.AmountCents, key)
		require.Equal(t, hongbao.FormatCents(held.Cents), g.Amount, key)
		if seen[g.CampaignID] == nil {
			seen[g.CampaignID] = &sum{}
		}
		seen[g.CampaignID].count++
		seen[g.CampaignID].cents += held.Cents
	}
	for p, c := range fx.Protocols {
		for _, want := range []struct {
			id           string
			count, cents int64
		}{{c.Grab, 5, c.GrabTotalCents}, {c.Batch, 3, c.BatchTotalCents}, {c.Stream, c.StreamCount, c.StreamTotalCents}} {
			st, err := srv.eng.Status(ctx, want.id)
			require.NoError(t, err)
			require.Equal(t, want.count, st.GrantedCount, "%s: %s", p, want.id)
			require.Equal(t, want.cents, st.GrantedCents, "%s: %s", p, want.id)
			require.NotNil(t, seen[want.id], "%s: the client recorded no grant of %s", p, want.id)
			require.Equal(t, sum{want.count, want.cents}, *seen[want.id], "%s: what the client saw of %s", p, want.id)
		}

		var confirmed int64
		for _, d := range got.Discounts {
			if d.CampaignID == c.Discount && d.State == "confirmed" {
				cents, err := strconv.ParseInt(d.AmountCents, 10, 64)
				require.NoError(t, err)
				require.Equal(t, hongbao.FormatCents(cents), d.Amount)
				confirmed += cents
			}
		}
		require.Positive(t, confirmed, "%s: the client recorded no confirmed discount", p)
		st, err := srv.eng.Discounts().Status(ctx, c.Discount)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.ConfirmedCount, p)
		require.Equal(t, confirmed, st.ConfirmedCents, "%s: the confirmed discount", p)
		require.Zero(t, st.ReservedCount, "%s: the cancelled order's discount went back", p)
	}
}

// needNode finds node (20 or later) and npm: without them the test skips
// saying so, and fails under CI=true.
func needNode(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI must have them (apt-get install -y nodejs npm)", why)
		}
		t.Skipf("%s (apt-get install nodejs npm)", why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing("npm is not installed")
	}
	v, err := exec.Command(node, "--version").Output()
	if err != nil {
		missing(fmt.Sprintf("node --version: %v", err))
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".", 2)[0])
	if major < 20 {
		missing(fmt.Sprintf("node %s is older than 20", strings.TrimSpace(string(v))))
	}
	return npm
}

// npmCI installs the locked dependencies unless node_modules already
// holds those of the current package-lock.json (a stamp of its hash).
func npmCI(t *testing.T, npm string) {
	t.Helper()
	lock, err := os.ReadFile("package-lock.json")
	require.NoError(t, err)
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join("node_modules", ".hongbao-lock-sha256")
	if have, err := os.ReadFile(stamp); err == nil && string(have) == want {
		return
	}
	run(t, npm, nil, "ci")
	require.NoError(t, os.WriteFile(stamp, []byte(want), 0o644))
}

// run runs npm in this directory and returns its output; a failure fails
// the test with that output.
func run(t *testing.T, npm string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, append(args, "--no-audit", "--no-fund", "--no-update-notifier")...)
	cmd.Env = append(os.Environ(), env...)
	// npm runs node and tsc as children: on the deadline the whole group
	// is killed, and the output pipes are not waited for past WaitDelay.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	require.NoError(t, err, "npm %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out.String())
	return out.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// unavailableCodes are the codes of docs/service.md's table answered
// with the status unavailable (the table is held to the server's own by
// httpapi's TestRPCCodesDocumented), sorted.
func unavailableCodes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/service.md")
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| \\d{3} \\| `unavailable` \\(14\\) \\|$").FindAllStringSubmatch(string(b), -1)
	var out []string
	for _, m := range rows {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out, "docs/service.md has no unavailable row")
	slices.Sort(out)
	return out
}

// server is the API as serve runs it, on a real listener.
type server struct {
	url       string
	eng       *hongbao.Engine
	transport *http.Transport
}

func startServer(t *testing.T) *server {
	t.Helper()
	r := testenv.SharedRedis(t)
	led, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led, Logger: log})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{
		Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""),
		UserSecrets: []httpapi.Secret{userSecret}, AdminKeys: [][]byte{[]byte(adminKey)},
		PaymentKeys: [][]byte{[]byte(paymentKey)}, GatewayKeys: [][]byte{[]byte(gatewayKey)},
		Degraded: map[string]func(context.Context) error{"ledger": led.Ping},
		Fund: func(ctx context.Context, c *hongbao.Campaign) error {
			return led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total})
		},
		// The stream grabs 240 users at once, the batch repeats: the
		// per-user limit is not under test here.
		UserRate:   -1,
		RetryAfter: retryAfter,
		Logger:     log,
	})
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(&loseOnce{next: api})
	// As serve has it: HTTP/1.1 and HTTP/2 with prior knowledge (h2c).
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	// The HTTP/2 server logs each GOAWAY of a client closing its
	// connection; serve sends its server's log to its logger.
	hs.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
	hs.Start()
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &server{url: hs.URL, eng: eng, transport: tr}
}

// create creates a campaign (path /v1/campaigns or /v1/discounts) as
// admin and returns its id.
func (s *server) create(t *testing.T, path, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	// The reply is checked against openapi.json.
	hc := &http.Client{Transport: openapitest.Transport(t, s.transport), Timeout: 30 * time.Second}
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, res.StatusCode, "%s", b)
	var c struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &c))
	require.NotEmpty(t, c.ID)
	return c.ID
}

// loseOnce serves the API, except that the first request carrying a
// given loseHeader value is served and its answer dropped: the client is
// answered outcome_unknown (unavailable) with a wait, in its protocol, as
// when a reply is lost between the engine and the client.
type loseOnce struct {
	next http.Handler
	seen sync.Map
}

func (l *loseOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(loseHeader)
	if key == "" {
		l.next.ServeHTTP(w, r)
		return
	}
	if _, again := l.seen.LoadOrStore(key, true); again {
		l.next.ServeHTTP(w, r)
		return
	}
	l.next.ServeHTTP(httptest.NewRecorder(), r)
	e := connect.NewError(connect.CodeUnavailable, errors.New("the answer was lost"))
	if d, err := connect.NewErrorDetail(&hongbaov1.Error{Code: httpapi.CodeOutcomeUnknown, RetryAfterMs: retryAfter.Milliseconds()}); err == nil {
		e.AddDetail(d)
	}
	_ = connect.NewErrorWriter().Write(w, r, e)
}
