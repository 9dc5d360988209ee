package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestScrapeKeepsTotalsWhenOneCampaignFails: a campaign whose backlog
// cannot be read makes the scrape report hongbao_state_scrape_errors 1,
// but the settlement totals are still exported (summed over the campaigns
// that could be read): a series that vanished would silence its alert.
func TestScrapeKeepsTotalsWhenOneCampaignFails(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ts := newTestServer(t, func(c *httpapi.Config) { c.Settlement, c.Engine = settle.NewBacklogs(r.Client, ""), eng })
	ctx := context.Background()
	good, err := eng.Create(ctx, hongbao.Spec{Total: 500, Count: 5})
	require.NoError(t, err)
	_, err = eng.Grab(ctx, good.ID, "alice")
	require.NoError(t, err)
	bad, err := eng.Create(ctx, hongbao.Spec{Total: 500, Count: 5})
	require.NoError(t, err)
	k := redisstore.Default.CampaignKeys(bad.ID)
	require.NoError(t, r.Client.Do(ctx, r.Client.B().XgroupDestroy().Key(k.Grants).Group(redisstore.SettleGroup).Build()).Error())

	rep := ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, rep.Status)
	body := string(rep.Body)
	require.Contains(t, body, "\nhongbao_state_scrape_errors 1\n", "the unreadable campaign is a scrape error")
	require.Contains(t, body, "\nhongbao_settlement_lag_entries 1\n", "the readable campaign's grant is still summed")
}
