package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/settle"
)

// TestBacklogMetrics: the settlement backlog is exported per campaign, in
// entries and in cents, and in cents over every campaign; once a worker
// settles the campaign, its figures drop to zero.
func TestBacklogMetrics(t *testing.T) {
	t.Parallel()
	var ts *testServer
	ts = newTestServer(t, func(c *httpapi.Config) {
		c.SettledCents = func(ctx context.Context, id string) (int64, error) {
			tot, err := ts.Ledger.Totals(ctx, id)
			return tot.GrantCents, err
		}
	})
	id := ts.create(t, `{"total":"1.00","count":4}`)
	var granted int64
	for i := range 3 {
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, fmt.Sprintf("b%d", i)), "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		c, err := strconv.ParseInt(fmt.Sprint(r.json(t)["amount_cents"]), 10, 64)
		require.NoError(t, err, "%s", r.Body)
		granted += c
	}
	gauge := func(body, name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`\n` + regexp.QuoteMeta(name) + ` (\S+)\n`).FindStringSubmatch(body)
		require.NotNil(t, m, "%s not in\n%s", name, body)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	r := ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status)
	body := string(r.Body)
	require.EqualValues(t, 3, gauge(body, `hongbao_settlement_campaign_lag_entries{campaign="`+id+`"}`))
	require.EqualValues(t, granted, gauge(body, `hongbao_settlement_campaign_lag_cents{campaign="`+id+`"}`))
	require.GreaterOrEqual(t, gauge(body, "hongbao_settlement_lag_cents"), float64(granted), "the total counts this campaign")

	w, err := settle.New(settle.Config{Redis: ts.Redis.Client, Ledger: ts.Ledger, Consumer: "metrics", Only: []string{id}, Logger: quiet()})
	require.NoError(t, err)
	_, err = w.Pass(t.Context())
	require.NoError(t, err)
	// The Redis part of a scrape is cached for a second.
	require.Eventually(t, func() bool {
		body := string(ts.do(t, "GET", "/metrics", string(adminKey), "").Body)
		return regexp.MustCompile(`\nhongbao_settlement_campaign_lag_cents\{campaign="`+id+`"\} 0\n`).MatchString(body) &&
			regexp.MustCompile(`\nhongbao_settlement_campaign_lag_entries\{campaign="`+id+`"\} 0\n`).MatchString(body)
	}, 10*time.Second, 50*time.Millisecond)
}
