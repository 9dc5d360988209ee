package cli

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestServeReapsAndSettlesDiscounts: serve's scheduler expires an
// abandoned reservation while the campaign is still open (the reaper under
// the lease), closes the campaign at closes_at, settles it into the
// ledger with the leftover refunded, and the reconcile agrees.
func TestServeReapsAndSettlesDiscounts(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	payFile := writeSecret(t, fx.dir, "payment.key")
	p := startServe(t, fx.args("--user-rate", "-1", "--reap-every", "50ms", "--payment-key-file", payFile)...)
	api := fx.api(t, p.URL)
	pay, err := os.ReadFile(payFile)
	require.NoError(t, err)
	closes := time.Now().Add(6 * time.Second)
	code, m, err := api.call("POST", p.URL+"/v1/discounts", api.admin,
		fmt.Sprintf(`{"budget":"10.00","quota":10,"hold":"1s","closes_at":%q}`, closes.Format(time.RFC3339Nano)))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	id := m["id"].(string)
	base := p.URL + "/v1/discounts/" + id
	post := func(path, body string) map[string]any {
		code, m, err := api.call("POST", base+path, strings.TrimSpace(string(pay)), body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m
	}
	// The user's own token cannot confirm: 403.
	code, m, err = api.call("POST", base+"/reserve", api.userToken(t, "kim"), `{"user_id":"kim","order_id":"o-1","order_amount":"100.00"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code, "%v", m)
	kept := post("/reserve", `{"user_id":"kim","order_id":"o-1","order_amount":"100.00"}`)
	post("/orders/o-1/confirm", `{"user_id":"kim"}`)
	post("/reserve", `{"user_id":"lee","order_id":"o-1","order_amount":"100.00"}`) // abandoned
	status := func() map[string]any {
		code, m, err := api.call("GET", base, api.admin, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m
	}
	waitFor(t, "the reaper to expire the abandoned reservation", 5*time.Second, func() bool {
		return status()["reserved_count"].(float64) == 0
	})
	require.True(t, time.Now().Before(closes), "expired while open: the reaper did it, not the settlement of a closed campaign")
	waitFor(t, "the scheduler to close, refund and settle", 20*time.Second, func() bool { return status()["state"] == "settled" })
	st := status()
	require.Equal(t, "time", st["close_reason"])
	require.EqualValues(t, 1, st["confirmed_count"])
	require.Equal(t, kept["amount_cents"], st["confirmed_cents"])
	require.EqualValues(t, 1000, st["confirmed_cents"].(float64)+st["remaining_cents"].(float64))
	require.Equal(t, st["remaining_cents"], st["refunded_cents"])
	code2, out, errs := run(t, nil, "reconcile", "--discount", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code2, "%s %s", out, errs)
	require.Contains(t, out, "OK")
}
