package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// pgBehindProxy gives the test a schema of its own in the PostgreSQL the
// ledger tests use (HONGBAO_TEST_POSTGRES, default the local server's
// database test), dropped when the test ends, and a fault proxy in front
// of the server: the DSN it returns goes through the proxy. Without a
// server the test skips, or fails under CI=true.
func pgBehindProxy(t *testing.T) (dsn string, proxy *testenv.Proxy) {
	t.Helper()
	base := os.Getenv("HONGBAO_TEST_POSTGRES")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "hbcli_" + hex.EncodeToString(b[:])
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL at %s: %v", base, err)
		}
		t.Skipf("no PostgreSQL at %s: %v", base, err)
	}
	t.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	proxy = testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), proxy
}

// userOn returns a user id whose home is shard k of a campaign of shards
// shards.
func userOn(k, shards int, prefix string) string {
	for i := 0; ; i++ {
		if u := fmt.Sprint(prefix, i); hongbao.HomeShard(u, shards) == k {
			return u
		}
	}
}

// TestServeLedgerOutage: an API process (serve --settle=false, as the
// operations guide deploys it) whose PostgreSQL ledger is cut off by a
// relay. It stays ready (/readyz 200, the ledger named unreachable in its
// body, hongbao_ledger_up 0) and grants from the blocks of packets it
// opened; reads answer; a grab that needs the next block answers 503
// unavailable with Retry-After and a message naming the ledger, a create
// too, and the log says so once, not once a request. With the ledger
// back, the refused grab is granted from the block recorded then.
func TestServeLedgerOutage(t *testing.T) {
	t.Parallel()
	dsn, proxy := pgBehindProxy(t)
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--ledger", dsn, "--settle=false", "--user-rate", "-1")...)
	api := fx.api(t, p.URL)
	const shards = 4
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"40.00","count":40,"shards":%d}`, shards))
	grab := func(user string) (int, map[string]any, http.Header) {
		t.Helper()
		req, err := http.NewRequest("POST", p.URL+"/v1/campaigns/"+id+"/grab", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+api.userToken(t, user))
		res, err := api.c.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var m map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
		return res.StatusCode, m, res.Header
	}
	// Shard 0's first block opens, recorded in the ledger; shard 1's does
	// not.
	code, m, _ := grab(userOn(0, shards, "before"))
	require.Equal(t, http.StatusOK, code, "%v", m)
	require.Equal(t, "granted", m["outcome"])

	proxy.Cut()
	code, m, _ = grab(userOn(0, shards, "during"))
	require.Equal(t, http.StatusOK, code, "a grab of an opened block needs no ledger: %v", m)
	require.Equal(t, "granted", m["outcome"])
	code, text, err := api.raw("GET", p.URL+"/v1/campaigns/"+id, api.admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "reads need no ledger: %s", text)

	waiting := userOn(1, shards, "waiting")
	for range 10 {
		code, m, hdr := grab(waiting)
		require.Equal(t, http.StatusServiceUnavailable, code, "%v", m)
		e := m["error"].(map[string]any)
		require.Equal(t, "unavailable", e["code"], "not busy: Redis is fine")
		require.Contains(t, e["message"], "ledger is unreachable")
		require.NotEmpty(t, hdr.Get("Retry-After"))
	}
	code, cm, err := api.call("POST", p.URL+"/v1/campaigns", api.admin, `{"total":"1.00","count":2}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", cm)
	require.Equal(t, "unavailable", cm["error"].(map[string]any)["code"])
	require.LessOrEqual(t, strings.Count(p.stderr.String(), "the ledger is unreachable"), 2,
		"one log line a period, not one per refusal:\n%s", p.stderr.String())
	require.Contains(t, p.stderr.String(), "the ledger is unreachable")

	var checks map[string]string
	waitFor(t, "/readyz to read the ledger unreachable", 10*time.Second, func() bool {
		code, text, err := api.raw("GET", p.URL+"/readyz", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "a ledger outage leaves the API ready: %s", text)
		var body struct{ Checks map[string]string }
		require.NoError(t, json.Unmarshal([]byte(text), &body))
		checks = body.Checks
		return strings.HasPrefix(checks["ledger"], "unreachable")
	})
	t.Logf("/readyz during the outage: %v", checks)
	require.Equal(t, "ok", checks["redis"])
	require.NotContains(t, checks["ledger"], "127.0.0.1", "no address, user or database in the body")
	waitFor(t, "hongbao_ledger_up 0", 10*time.Second, func() bool {
		_, text, err := api.raw("GET", p.URL+"/metrics", api.admin)
		require.NoError(t, err)
		return strings.Contains(text, "\nhongbao_ledger_up 0\n")
	})

	proxy.Restore()
	waitFor(t, "the refused grab granted once the ledger is back", 20*time.Second, func() bool {
		code, m, _ := grab(waiting)
		return code == http.StatusOK && m["outcome"] == "granted"
	})
	waitFor(t, "/readyz to read the ledger ok", 10*time.Second, func() bool {
		_, text, err := api.raw("GET", p.URL+"/readyz", "")
		require.NoError(t, err)
		return strings.Contains(text, `"ledger":"ok"`)
	})
	api.create(t, p.URL, `{"total":"1.00","count":2}`)
}

// TestServeReadyzRefusedWrites: /readyz says not ready while Redis
// answers but refuses writes (here NOREPLICAS, from min-replicas-to-write
// with no replica), with the code of the refusal, and ready again once it
// takes writes: PING alone would call such a Redis healthy.
func TestServeReadyzRefusedWrites(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--settle=false")...)
	api := fx.api(t, p.URL)
	readyz := func() (int, string) {
		code, text, err := api.raw("GET", p.URL+"/readyz", "")
		require.NoError(t, err)
		return code, text
	}
	code, text := readyz()
	require.Equal(t, http.StatusOK, code, text)
	rc := fx.redis.Client
	ctx := context.Background()
	require.NoError(t, rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "1").Build()).Error())
	waitFor(t, "/readyz 503 naming NOREPLICAS", 10*time.Second, func() bool {
		code, text = readyz()
		return code == http.StatusServiceUnavailable
	})
	require.Contains(t, text, `"redis":"refuses writes: NOREPLICAS"`)
	require.Contains(t, p.stderr.String(), "readiness check failed")
	require.NoError(t, rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "0").Build()).Error())
	waitFor(t, "/readyz 200 again", 10*time.Second, func() bool {
		code, _ = readyz()
		return code == http.StatusOK
	})
}
