package cli

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestServeSchedulesCampaign: with nobody closing it, a campaign created
// over HTTP opens at opens_at, is closed by serve's scheduler at
// closes_at, refunded and settled, and reconciles.
func TestServeSchedulesCampaign(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1")...)
	api := fx.api(t, p.URL)
	now := time.Now()
	opens, closes := now.Add(1500*time.Millisecond), now.Add(3*time.Second)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"10.00","count":4,"opens_at":%q,"closes_at":%q}`,
		opens.Format(time.RFC3339Nano), closes.Format(time.RFC3339Nano)))
	// Created with a ledger configured: the fund entry is written at
	// create, before the campaign opens and long before its first grant.
	led, err := open.Open(t.Context(), fx.dsn)
	require.NoError(t, err)
	tot, err := led.Totals(t.Context(), id)
	require.NoError(t, led.Close())
	require.NoError(t, err)
	require.EqualValues(t, 1000, tot.Funded, "fund entry at create")
	tok := api.userToken(t, "early-bird")
	grab := func() string {
		code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", tok, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m["outcome"].(string)
	}
	if time.Now().Before(opens.Add(-200 * time.Millisecond)) {
		require.Equal(t, "not_open", grab())
	}
	waitFor(t, "the campaign to open", 10*time.Second, func() bool { return grab() != "not_open" })
	require.Equal(t, "already_granted", grab())

	status := func() map[string]any {
		code, m, err := api.call("GET", p.URL+"/v1/campaigns/"+id, api.admin, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		return m
	}
	waitFor(t, "the scheduler to close, refund and settle", 20*time.Second, func() bool { return status()["state"] == "settled" })
	st := status()
	require.Equal(t, "time", st["close_reason"])
	require.EqualValues(t, 1, st["granted_count"])
	require.EqualValues(t, 1000, st["granted_cents"].(float64)+st["refunded_cents"].(float64))
	require.Positive(t, st["refunded_cents"])
	require.Equal(t, "already_granted", grab(), "the holder still sees their packet")
	code, out, errs := run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "%s %s", out, errs)
	require.Contains(t, out, "OK")
}
