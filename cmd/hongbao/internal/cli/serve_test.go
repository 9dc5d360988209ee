package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenRe = regexp.MustCompile(`listening on (https?://[0-9.:]+)`)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveProc is a serve command running in-process.
type serveProc struct {
	URL     string
	cancel  context.CancelFunc
	stopNow chan struct{}
	done    chan int
	stderr  *syncBuffer
}

func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	// A serve's files go to its data directory, by default hongbao-data
	// in the working directory: the package's, in a test. Unless the test
	// names one (or a config file may), a directory of the test's.
	if !slices.Contains(args, "--data-dir") && !slices.Contains(args, "--config") {
		args = append(args, "--data-dir", t.TempDir())
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	p := &serveProc{cancel: cancel, stopNow: make(chan struct{}), done: make(chan int, 1), stderr: errb}
	go func() {
		p.done <- Run(ctx, append([]string{"serve"}, args...), &IO{Stdout: out, Stderr: errb, Getenv: func(string) string { return "" },
			StopNow: p.stopNow})
	}()
	waitFor(t, "serve to listen", 30*time.Second, func() bool {
		select {
		case code := <-p.done:
			t.Fatalf("serve exited with %d: %s", code, errb.String())
		default:
		}
		m := listenRe.FindStringSubmatch(out.String())
		if m != nil {
			p.URL = m[1]
		}
		return m != nil
	})
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop cancels the context and closes StopNow (what two SIGTERMs do in
// main: the shutdown without its delay) and checks the clean exit.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	if p.cancel == nil {
		return
	}
	close(p.stopNow)
	p.cancel()
	p.cancel = nil
	select {
	case code := <-p.done:
		require.Equal(t, 0, code, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func writeSecret(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	var b [24]byte
	_, _ = rand.Read(b[:])
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("  %x\n", b)), 0o600))
	return p
}

// serveFixture is what a test of serve starts one or more serves on: a
// private Redis, and a directory holding an admin key, a token secret and
// the ledger.
type serveFixture struct {
	redis                           *testenv.Redis
	dir, adminFile, secretFile, dsn string
}

func newServeFixture(t *testing.T, opt redisserver.Options) *serveFixture {
	t.Helper()
	dir := t.TempDir()
	return &serveFixture{
		redis: testenv.NewRedis(t, opt), dir: dir,
		adminFile: writeSecret(t, dir, "admin.key"), secretFile: writeSecret(t, dir, "token.secret"),
		dsn: "sqlite:" + filepath.Join(dir, "ledger.db"),
	}
}

// redisURL is the fixture's Redis as serve's --redis takes it.
func (f *serveFixture) redisURL() string { return "redis://" + f.redis.Addr }

// args returns serve's flags for the fixture on a free port, its data
// directory in the fixture's (unless extra names one), then extra.
func (f *serveFixture) args(extra ...string) []string {
	args := []string{"--redis", f.redisURL(), "--ledger", f.dsn, "--admin-key-file", f.adminFile,
		"--token-secret-file", f.secretFile, "--listen", "127.0.0.1:0"}
	if !slices.Contains(extra, "--data-dir") {
		args = append(args, "--data-dir", filepath.Join(f.dir, "data"))
	}
	return append(args, extra...)
}

// api returns a client of the serve at url with the fixture's secrets.
func (f *serveFixture) api(t *testing.T, url string) *apiClient {
	t.Helper()
	return newAPIClient(t, url, f.adminFile, f.secretFile)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// apiClient speaks to a serve over HTTP; every reply is checked against
// openapi.json.
type apiClient struct {
	url, admin string
	secret     httpapi.Secret
	c          *http.Client
}

func newAPIClient(t *testing.T, url, adminFile, secretFile string) *apiClient {
	t.Helper()
	a, err := os.ReadFile(adminFile)
	require.NoError(t, err)
	s, err := os.ReadFile(secretFile)
	require.NoError(t, err)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{url: url, admin: strings.TrimSpace(string(a)), secret: httpapi.Secret{Key: bytes.TrimSpace(s)},
		c: &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 30 * time.Second}}
}

// raw answers a call's status and body as text.
func (a *apiClient) raw(method, url, auth string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	res, err := a.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func (a *apiClient) call(method, url, auth, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	res, err := a.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		return res.StatusCode, nil, err
	}
	return res.StatusCode, m, nil
}

// userToken mints a token; it may run on any goroutine (it reports with
// t.Errorf, not FailNow).
func (a *apiClient) userToken(t *testing.T, user string) string {
	t.Helper()
	tok, err := httpapi.MintToken(a.secret, user, time.Hour, time.Now())
	if err != nil {
		t.Errorf("mint a token for %s: %v", user, err)
	}
	return tok
}

func (a *apiClient) create(t *testing.T, base, body string) string {
	t.Helper()
	code, m, err := a.call("POST", base+"/v1/campaigns", a.admin, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	require.Regexp(t, `^ledger-[0-9a-f]{32}$`, m["owner"], "serve's campaigns record its ledger as their owner")
	return m["id"].(string)
}

type ack struct {
	user, packet string
	cents        int64
}

// TestServeSIGTERMKeepsAcknowledgedGrants builds the binary, runs serve
// on its embedded durable Redis, sends SIGTERM in the middle of a burst of
// grabs, and checks that every grant a client saw acknowledged is in Redis
// after the restart and reaches the ledger.
func TestServeSIGTERMKeepsAcknowledgedGrants(t *testing.T) {
	testenv.SharedRedis(t) // skips like every Redis test without redis-server
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hongbao")
	build := exec.Command("go", "build", "-o", bin, "github.com/hongbao/hongbao/cmd/hongbao")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--user-rate", "-1")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	urlc := make(chan string, 1)
	sc := bufio.NewScanner(stdout)
	go func() {
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	var url string
	select {
	case url = <-urlc:
	case err := <-exited:
		t.Fatalf("serve exited: %v %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("serve did not listen: %s", stderr.String())
	}
	api := newAPIClient(t, url, filepath.Join(data, "admin.key"), filepath.Join(data, "token.secret"))
	id := api.create(t, url, `{"total":"3000.00","count":3000}`)
	checkEmbeddedRedisLocked(t, stderr.String(), data, id)

	// The burst: 16 clients grab for fresh users until the server is gone.
	var next, granted atomic.Int64
	var mu sync.Mutex
	var acks []ack
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > 3000 {
					return
				}
				user := fmt.Sprint("sig", n)
				code, m, err := api.call("POST", url+"/v1/campaigns/"+id+"/grab", api.userToken(t, user), "")
				if err != nil {
					return // the server is gone
				}
				if code != http.StatusOK {
					t.Errorf("grab answered %d %v", code, m)
					return
				}
				if m["outcome"] == "granted" {
					mu.Lock()
					acks = append(acks, ack{user, m["packet_id"].(string), int64(m["amount_cents"].(float64))})
					mu.Unlock()
					if granted.Add(1) == 300 {
						once.Do(func() {
							if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
								t.Errorf("SIGTERM: %v", err)
							}
						})
					}
				}
			}
		}()
	}
	wg.Wait()
	once.Do(func() { require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) })
	select {
	case err := <-exited:
		require.NoError(t, err, "serve's exit: %s", stderr.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("serve did not stop: %s", stderr.String())
	}
	require.Contains(t, stderr.String(), "shutting down")
	require.Contains(t, stderr.String(), "settlement stopped after its current pass")
	addr := strings.TrimPrefix(url, "http://")
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("the port %s is still open after exit", addr)
	}
	require.GreaterOrEqual(t, len(acks), 300)
	t.Logf("%d grants acknowledged before and during the shutdown", len(acks))

	// Redis again, from the same data directory: every acknowledged grant
	// is there, and the ledger gets each exactly once.
	srv, err := redisserver.Start(context.Background(), redisserver.Options{Dir: filepath.Join(data, "redis")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	rc := testenv.Client(t, srv.Addr)
	ctx := context.Background()
	claims, err := rc.Do(ctx, rc.B().Hgetall().Key(redisstore.Default.CampaignKeys(id).Claims).Build()).AsStrMap()
	require.NoError(t, err)
	for _, a := range acks {
		seq := strings.TrimPrefix(a.packet, id+"/")
		require.Equal(t, fmt.Sprintf("%s:%d", seq, a.cents), claims[a.user], "acknowledged grant of %s lost", a.user)
	}
	eng, err := hongbao.New(hongbao.Config{Redis: rc})
	require.NoError(t, err)
	_, err = eng.CloseCampaign(ctx, id)
	require.NoError(t, err)
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(data, "ledger.db"))
	require.NoError(t, err)
	defer l.Close()
	w, err := settle.New(settle.Config{Redis: rc, Ledger: l, Consumer: "after", Only: []string{id}, Logger: quietLog(),
		ReclaimIdle: 100 * time.Millisecond, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, rc, "", l, id)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.EqualValues(t, len(claims), rep.GrantedLedger)
}

// checkEmbeddedRedisLocked: the redis-server serve started refuses a
// client without the password kept in the data directory (0600), as
// redis-cli run by another local process would be; with it, the campaign
// is there.
func checkEmbeddedRedisLocked(t *testing.T, log, data, id string) {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Log("redis-cli is not installed: the lock is checked by the redisserver tests only")
		return
	}
	m := regexp.MustCompile(`redis_addr=127.0.0.1:([0-9]+)`).FindStringSubmatch(log)
	require.NotNil(t, m, log)
	st, err := os.Stat(filepath.Join(data, "redis.pass"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	pass, err := os.ReadFile(filepath.Join(data, "redis.pass"))
	require.NoError(t, err)
	key := redisstore.Default.CampaignKeys(id).Meta
	out, _ := exec.Command(cli, "-p", m[1], "EXISTS", key).CombinedOutput()
	require.Contains(t, string(out), "NOAUTH", "redis-cli without the password")
	out, _ = exec.Command(cli, "-p", m[1], "--no-auth-warning", "-a", strings.TrimSpace(string(pass)), "EXISTS", key).CombinedOutput()
	require.Equal(t, "1", strings.TrimSpace(string(out)), "with the password")
}

// TestServeTwoProcesses runs two serves against one Redis and one ledger
// through a rain and a close: one scheduler at a time, the lease moves
// when its holder stops, and the ledger reconciles.
func TestServeTwoProcesses(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "everysec"})
	a := startServe(t, fx.args("--lease-ttl", "3s", "--user-rate", "-1", "--consumer", "a", "--pprof-listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--metrics-pprof")...)
	b := startServe(t, fx.args("--lease-ttl", "3s", "--user-rate", "-1", "--consumer", "b")...)
	require.Contains(t, a.stderr.String(), "not fsync-always")
	api := fx.api(t, a.URL)

	id := api.create(t, a.URL, `{"total":"500.00","count":1000,"min_cents":10}`)
	var granted, cents atomic.Int64
	var wg sync.WaitGroup
	users := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				tok := api.userToken(t, fmt.Sprint("two", u))
				for click, base := range []string{a.URL, b.URL} {
					code, m, err := api.call("POST", base+"/v1/campaigns/"+id+"/grab", tok, "")
					if err != nil || code != http.StatusOK {
						t.Errorf("grab: %d %v %v", code, m, err)
						return
					}
					if click == 0 && m["outcome"] == "granted" {
						granted.Add(1)
						cents.Add(int64(m["amount_cents"].(float64)))
					}
					if click == 1 && m["outcome"] == "granted" {
						t.Errorf("user %d granted twice", u)
					}
				}
			}
		}()
	}
	for u := 0; u < 1500; u++ {
		users <- u
	}
	close(users)
	wg.Wait()
	require.EqualValues(t, 1000, granted.Load())
	require.EqualValues(t, 50000, cents.Load())

	code, _, err := api.call("POST", b.URL+"/v1/campaigns/"+id+"/close", api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	waitFor(t, "the campaign to settle", 60*time.Second, func() bool {
		_, m, err := api.call("GET", b.URL+"/v1/campaigns/"+id, api.admin, "")
		return err == nil && m["state"] == "settled"
	})
	codeR, outR, errR := run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, codeR, "%s %s", outR, errR)
	require.Contains(t, outR, "OK")

	// pprof is on its own listener, not on the API.
	hc := openapitest.Client(t)
	res, err := hc.Get(a.URL + "/debug/pprof/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	m := regexp.MustCompile(`msg="pprof listening" addr=([0-9.:]+)`).FindStringSubmatch(a.stderr.String())
	require.NotNil(t, m, a.stderr.String())
	res, err = hc.Get("http://" + m[1] + "/debug/pprof/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	// /metrics names every campaign and its money: on the API address it
	// takes the admin key (or a metrics key); on --metrics-listen, a
	// private address, it takes nothing, and pprof is there when asked.
	res, err = hc.Get(a.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.NotContains(t, string(body), id)
	mm := regexp.MustCompile(`msg="metrics listening" addr=([0-9.:]+)`).FindStringSubmatch(a.stderr.String())
	require.NotNil(t, mm, a.stderr.String())
	for path, want := range map[string]string{"/metrics": "hongbao_grabs_total{", "/debug/pprof/": "goroutine"} {
		res, err = hc.Get("http://" + mm[1] + path)
		require.NoError(t, err)
		body, _ = io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, string(body), want, path)
	}

	// One lease holder at a time; when it stops, the other takes over.
	held := func(p *serveProc) bool {
		code, body, err := api.raw("GET", p.URL+"/metrics", api.admin)
		if err != nil || code != http.StatusOK {
			return false
		}
		return strings.Contains(body, "\nhongbao_scheduler_lease_held 1\n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for held(a) == held(b) {
		if time.Now().After(deadline) {
			t.Fatalf("no single lease holder (a %v %s, b %v %s)\nA: %s\nB: %s", held(a), a.URL, held(b), b.URL,
				grepLines(a.stderr.String(), "lease"), grepLines(b.stderr.String(), "lease"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	first, second := a, b
	if held(b) {
		first, second = b, a
	}
	// (Under a heavy load a renewal can time out and the lease move; it is
	// never held by both, which the metrics above show.)
	require.Contains(t, first.stderr.String(), "scheduler lease acquired")
	// One part, held by the lease holder.
	_, body1, err := api.raw("GET", first.URL+"/metrics", api.admin)
	require.NoError(t, err)
	require.Contains(t, body1, "\nhongbao_scheduler_parts 1\n")
	require.Contains(t, body1, "\nhongbao_scheduler_parts_held 1\n")
	first.stop(t)
	waitFor(t, "the other process to take the lease", 10*time.Second, func() bool { return held(second) })
}

func TestServeRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("  too-short  \n"), 0o600))
	good := writeSecret(t, dir, "good")
	evicting := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"short admin key", []string{"--admin-key-file", short, "--token-secret-file", good}, 2, "at least 32 are needed"},
		{"short token secret", []string{"--admin-key-file", good, "--token-secret-file", short}, 2, "at least 32 are needed"},
		{"missing key file", []string{"--admin-key-file", filepath.Join(dir, "none"), "--token-secret-file", good}, 2, "no such file"},
		{"missing receipt key file", []string{"--admin-key-file", good, "--token-secret-file", good, "--receipt-key-file", "k1=" + filepath.Join(dir, "none")}, 2,
			"--receipt-key-file k1=" + filepath.Join(dir, "none") + ": no such file, read as [kid=]PATH"},
		{"receipt key of another kind", []string{"--admin-key-file", good, "--token-secret-file", good, "--receipt-key-file", "k1=" + good}, 2,
			"--receipt-key-file " + good + ": fairness: receipt key: neither a PEM private key nor a 32-byte seed in hex"},
		{"no emulator", []string{"--admin-key-file", good, "--token-secret-file", good, "--redis-server", "/nonexistent/redis-server"}, 1, "redis-server is not installed"},
		{"evicting redis", []string{"--admin-key-file", good, "--token-secret-file", good, "--redis", "redis://" + evicting.Addr}, 1, "allkeys-lru"},
		{"bad listen", []string{"--listen", "nope"}, 2, "--listen"},
		{"bad log format", []string{"--log-format", "xml"}, 2, "--log-format"},
		{"bad play embedder", []string{"--play-embedder", "app.example.com"}, 2, "is not an origin"},
		{"no max count", []string{"--max-count", "0"}, 2, "--max-count must be 1-10000000, not 0"},
		{"max count past the split's", []string{"--max-count", "10000001"}, 2, "--max-count must be 1-10000000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := run(t, nil, append([]string{"serve", "--data-dir", filepath.Join(dir, "data")}, tc.args...)...)
			require.Equal(t, tc.code, code, errs)
			require.Contains(t, errs, tc.msg)
		})
	}
	// --allow-eviction starts it anyway, with a warning.
	p := startServe(t, "--admin-key-file", good, "--token-secret-file", good, "--redis", "redis://"+evicting.Addr,
		"--allow-eviction", "--listen", "127.0.0.1:0", "--ledger", "sqlite:"+filepath.Join(dir, "l.db"))
	require.Contains(t, p.stderr.String(), "may evict keys")
	p.stop(t)
}

// TestServeMaxCount: --max-count caps the packets of a campaign and the
// quota of a discount campaign created over the API; the default is
// 1,000,000.
func TestServeMaxCount(t *testing.T) {
	t.Parallel()
	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags(nil))
	require.Equal(t, 1_000_000, s.f.maxCount)
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--max-count", "3")...)
	api := fx.api(t, p.URL)
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/campaigns", `{"total":"1.00","count":4}`, http.StatusBadRequest},
		{"/v1/campaigns", `{"total":"1.00","count":3}`, http.StatusCreated},
		{"/v1/discounts", `{"budget":"1.00","quota":4}`, http.StatusBadRequest},
		{"/v1/discounts", `{"budget":"1.00","quota":3}`, http.StatusCreated},
	} {
		code, m, err := api.call("POST", p.URL+c.path, api.admin, c.body)
		require.NoError(t, err)
		require.Equal(t, c.want, code, "%s %s: %v", c.path, c.body, m)
		if c.want == http.StatusBadRequest {
			require.Contains(t, fmt.Sprint(m), "within 1 and 3")
		}
	}
}

func TestTokenCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := writeSecret(t, dir, "s")
	code, out, errs := run(t, nil, "token", "--user", "alice", "--ttl", "5m", "--token-secret-file", "k7="+secret)
	require.Equal(t, 0, code, errs)
	parts := strings.Split(strings.TrimSpace(out), ".")
	require.Len(t, parts, 3)
	hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.Contains(t, string(hdr), `"kid":"k7"`)
	require.Contains(t, string(hdr), `"alg":"HS256"`)
	// Signed with the file's trimmed secret, for alice, for 5 minutes.
	key, err := os.ReadFile(secret)
	require.NoError(t, err)
	var claims jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(strings.TrimSpace(out), &claims, func(*jwt.Token) (any, error) { return bytes.TrimSpace(key), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	require.NoError(t, err)
	require.Equal(t, "alice", claims.Subject)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), claims.ExpiresAt.Time, 30*time.Second)
	env := map[string]string{"HONGBAO_TOKEN_SECRET_FILE": secret}
	code, _, errs = run(t, env, "token", "--user", "bad user")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--user")
	code, _, errs = run(t, nil, "token", "--user", "bob", "--data-dir", filepath.Join(dir, "none"))
	require.Equal(t, 2, code)
	require.Contains(t, errs, "token-secret-file")
	code, out, _ = run(t, env, "token", "--user", "carol")
	require.Equal(t, 0, code)
	require.NotEmpty(t, strings.TrimSpace(out))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestEnsureSecretFileConcurrent: processes starting together on one data
// directory all read the same, whole secret.
func TestEnsureSecretFileConcurrent(t *testing.T) {
	t.Parallel()
	for round := 0; round < 20; round++ {
		p := filepath.Join(t.TempDir(), "token.secret")
		var wg sync.WaitGroup
		var made atomic.Int32
		got := make([]string, 8)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				created, err := ensureSecretFile(p)
				if !assert.NoError(t, err) {
					return
				}
				if created {
					made.Add(1)
				}
				k, err := readSecretFile("token-secret-file", p)
				if assert.NoError(t, err) {
					got[i] = string(k)
				}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, made.Load(), "exactly one creates it")
		for _, k := range got {
			require.Equal(t, got[0], k)
			require.Len(t, k, 64)
		}
		entries, err := os.ReadDir(filepath.Dir(p))
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left behind")
	}
}

// TestUsageErrorsHideSecrets: a usage error names the flag or variable at
// fault, never a password of a Redis URL or the value of an environment
// variable (which may be a secret).
func TestUsageErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	// A ledger that exists, since reconcile opens it before Redis.
	led := "sqlite:" + filepath.Join(t.TempDir(), "l.db")
	code, _, errs := run(t, nil, "migrate", "--ledger", led)
	require.Equal(t, 0, code, errs)
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"HONGBAO_USER_RATE": "hunter2-secret"}, []string{"serve"}, "HONGBAO_USER_RATE"},
		{nil, []string{"reconcile", "--campaign", "c1", "--ledger", led,
			"--redis", "redis://u:hunter2-secret@127.0.0.1:notaport"}, "--redis"},
		{nil, []string{"reconcile", "--campaign", "c1", "--ledger", led,
			"--redis", "redis://u:hunter2-secret@127.0.0.1:1/x%zz"}, "--redis"},
	} {
		code, out, errs := run(t, tc.env, tc.args...)
		require.NotEqual(t, 0, code, "%v: %s %s", tc.args, out, errs)
		require.NotContains(t, out+errs, "hunter2", "%v", tc.args)
		require.Contains(t, errs, tc.want, "%v", tc.args)
	}
}

// TestServeLoopbackRefusesOtherHosts: a serve bound to loopback answers
// only requests that name a loopback host, so a page on another site
// that rebinds its name to 127.0.0.1 cannot reach it through a browser.
func TestServeLoopbackRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args()...)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.URL, "http://"))
	hc := openapitest.Client(t)
	for host, want := range map[string]int{
		"evil.example:" + port: http.StatusMisdirectedRequest,
		"evil.example":         http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io":     http.StatusMisdirectedRequest,
		"localhost:" + port:    http.StatusOK,
		"127.0.0.1:" + port:    http.StatusOK,
		"[::1]:" + port:        http.StatusOK,
	} {
		req, err := http.NewRequest("GET", p.URL+"/healthz", nil)
		require.NoError(t, err)
		req.Host = host
		res, err := hc.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, want, res.StatusCode, host)
	}
}

// TestServeTokenScope: serve with --token-issuer, --token-audience and
// --token-max-age takes the tokens `hongbao token` mints with the same
// flags, and refuses one without the audience or living too long; token
// given the same --token-max-age refuses to mint that one.
func TestServeTokenScope(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--token-issuer", "https://id.example", "--token-audience", "hongbao", "--token-max-age", "1h")...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"1.00","count":1}`)
	mint := func(args ...string) string {
		code, out, errs := run(t, nil, append([]string{"token", "--user", "alice", "--token-secret-file", fx.secretFile}, args...)...)
		require.Equal(t, 0, code, errs)
		return strings.TrimSpace(out)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--ttl", "30m", "--token-issuer", "https://id.example", "--token-audience", "hongbao"}, http.StatusNotFound}, // through: no grant yet
		{[]string{"--ttl", "30m", "--token-issuer", "https://id.example"}, http.StatusUnauthorized},
		{[]string{"--ttl", "30m", "--token-issuer", "https://id.example", "--token-audience", "other"}, http.StatusUnauthorized},
		{[]string{"--ttl", "30m", "--token-audience", "hongbao"}, http.StatusUnauthorized},
		{[]string{"--ttl", "2h", "--token-issuer", "https://id.example", "--token-audience", "hongbao"}, http.StatusUnauthorized},
	} {
		code, m, err := api.call("GET", p.URL+"/v1/campaigns/"+id+"/grants/me", mint(c.args...), "")
		require.NoError(t, err)
		require.Equal(t, c.want, code, "%v: %v", c.args, m)
	}
	// Given serve's --token-max-age, token refuses what serve would.
	code, out, errs := run(t, nil, "token", "--user", "alice", "--token-secret-file", fx.secretFile, "--token-max-age", "1h", "--ttl", "2h")
	require.Equal(t, 2, code, out)
	require.Contains(t, errs, "exceeds --token-max-age")
	require.Empty(t, out, "no token")
}
