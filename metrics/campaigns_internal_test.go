package metrics

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestScrapesShareRedisReads: scrapes within cacheFor of each other reuse
// one reading of Redis (a flood of /metrics requests does not become a
// flood of Redis calls); past it, Redis is read again.
func TestScrapesShareRedisReads(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"}) // its own campaigns only
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{Total: 100, Count: 2})
	require.NoError(t, err)

	cc := NewCampaigns(CampaignsConfig{Campaigns: eng, Backlogs: settle.NewBacklogs(r.Client, ""),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sc := cc.state
	sc.cacheFor = time.Hour
	reg := prometheus.NewRegistry()
	reg.MustRegister(cc)
	pool := func() float64 {
		t.Helper()
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "hongbao_campaign_pool_remaining_packets" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == c.ID {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no pool metric for %s", c.ID)
		return 0
	}
	require.EqualValues(t, 2, pool())
	g, err := eng.Grab(ctx, c.ID, "u1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	require.EqualValues(t, 2, pool(), "the second scrape read Redis again")
	sc.mu.Lock()
	sc.cacheFor = 0
	sc.mu.Unlock()
	require.EqualValues(t, 1, pool())
}
