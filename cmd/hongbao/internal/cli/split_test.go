package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestSplitDeployment runs the deployment docs/operations.md recommends,
// as an operator would, every command with one config file: an API
// process (serve --settle=false) and a settle process, a Redis that asks
// for a password (in a file), a PostgreSQL ledger behind a relay, the
// secrets in files, a namespace of the deployment's own. It checks the
// duties of each role in that topology: the settle process settles a
// rain into PostgreSQL and expires an abandoned discount hold while the
// campaign is open (the user's allowance comes back); a junk token flood
// from the gateway's address never refuses a valid user, the payment key
// or the admin key; the ledger cut off leaves the API ready and its
// grants pending, settled once the ledger is back; the close is refunded
// and reconcile, run from the same file, finds Redis and the ledger
// agree to the cent, as reconcile --balances does for every account.
func TestSplitDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const pass = "Split-Deployment-Redis-Password-7"
	srv, err := redisserver.Start(ctx, redisserver.Options{AOF: "off", Password: pass})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	dsn, relay := pgBehindProxy(t)
	dir := t.TempDir()
	passFile := filepath.Join(dir, "redis.pass")
	require.NoError(t, os.WriteFile(passFile, []byte(pass+"\n"), 0o600))
	admin, secret, payment := writeSecret(t, dir, "admin_key"), writeSecret(t, dir, "token_secret"), writeSecret(t, dir, "payment_key")
	cfg := writeConfig(t, fmt.Sprintf(`namespace: split
data-dir: %s
redis: %s
redis-password-file: %s
ledger: %s
admin-key-file: %s
token-secret-file: %s
token-max-age: 1h
serve:
  listen: 127.0.0.1:0
  settle: false
  payment-key-file: [%s]
  user-rate: -1
settle:
  consumer: scheduler
  reap-every: 100ms
  lease-ttl: 1s
`, filepath.Join(dir, "data"), srv.Addr, passFile, dsn, admin, secret, payment))
	ok := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, nil, append(args, "--config", cfg)...)
		require.Equal(t, 0, code, "%v: %s", args, errs)
		return out
	}

	require.Contains(t, ok("migrate"), "identity ledger-")
	p := startServe(t, "--config", cfg)
	settleCtx, stopSettle := context.WithCancel(ctx)
	settled := make(chan int, 1)
	go func() {
		settled <- Run(settleCtx, []string{"settle", "--config", cfg}, &IO{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, Getenv: func(string) string { return "" }})
	}()
	t.Cleanup(func() {
		stopSettle()
		require.Equal(t, 0, <-settled, "settle exits cleanly")
	})
	api := newAPIClient(t, p.URL, admin, secret)
	pay, err := os.ReadFile(payment)
	require.NoError(t, err)
	payKey := strings.TrimSpace(string(pay))
	led, err := open.OpenExisting(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })

	// A rain, settled by the other process into PostgreSQL.
	id := api.create(t, p.URL, `{"total":"30.00","count":30,"shards":2}`)
	grab := func(user string) map[string]any {
		t.Helper()
		code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, user), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m
	}
	for i := range 10 {
		require.Equal(t, "granted", grab(fmt.Sprint("u", i))["outcome"])
	}
	waitFor(t, "settle to write the rain's grants into PostgreSQL", 20*time.Second, func() bool {
		tot, err := led.Totals(ctx, id)
		return err == nil && tot.GrantCount == 10
	})

	// A payment abandoned after its reservation: the settle process
	// expires the hold while the campaign is open, and gives the unit
	// and the user's allowance back.
	code, d, err := api.call("POST", p.URL+"/v1/discounts", api.admin,
		`{"budget":"10.00","quota":10,"min":"1.00","max":"1.00","per_user_count":1,"hold":"1s"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", d)
	did := d["id"].(string)
	reserveFor := func(user, order string) string {
		t.Helper()
		code, m, err := api.call("POST", p.URL+"/v1/discounts/"+did+"/reserve", payKey,
			fmt.Sprintf(`{"user_id":%q,"order_id":%q,"order_amount":"50.00"}`, user, order))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m["outcome"].(string)
	}
	reserve := func(order string) string { return reserveFor("buyer", order) }
	require.Equal(t, "reserved", reserve("o1"))
	require.Equal(t, "limit", reserve("o2"), "one discount per user while the first is held")
	waitFor(t, "settle to expire the abandoned hold", 15*time.Second, func() bool { return reserve("o3") == "reserved" })

	// Junk from the gateway's address never locks out a valid credential.
	limited := 0
	for range 80 {
		code, _, err := api.raw("GET", p.URL+"/v1/campaigns/"+id+"/grants/me", "junk.token.value")
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests}, code)
		if code == http.StatusTooManyRequests {
			limited++
		}
	}
	require.Positive(t, limited, "the junk spent the address's allowance of failures")
	require.Equal(t, "granted", grab("after-junk")["outcome"], "a valid user token")
	code, _, err = api.raw("GET", p.URL+"/v1/campaigns/"+id, api.admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "the admin key")
	require.Equal(t, "reserved", reserveFor("buyer-2", "o1"), "the payment key")

	// The ledger cut off: the API stays ready and grants from its opened
	// blocks; the grants wait in Redis and are settled once it is back.
	relay.Cut()
	code, body, err := api.raw("GET", p.URL+"/readyz", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "ready while Redis grants: %s", body)
	require.Contains(t, body, "ledger")
	for i := range 5 {
		require.Equal(t, "granted", grab(fmt.Sprint("cut", i))["outcome"])
	}
	relay.Restore()
	waitFor(t, "settle to catch up once the ledger is back", 30*time.Second, func() bool {
		tot, err := led.Totals(ctx, id)
		return err == nil && tot.GrantCount == 16
	})

	// The close is refunded by the settle process; reconcile, from the
	// same file, finds Redis and the ledger agree.
	require.Contains(t, ok("campaign", "--api", p.URL, "close", id), id)
	waitFor(t, "the refund", 20*time.Second, func() bool {
		tot, err := led.Totals(ctx, id)
		return err == nil && tot.RefundDone
	})
	require.Contains(t, ok("reconcile", "--campaign", id), "OK")
	require.Contains(t, ok("reconcile", "--balances"), "OK")
	require.Contains(t, ok("owner", id), id+" is owned by ledger-")
}
