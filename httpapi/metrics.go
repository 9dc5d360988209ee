package httpapi

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hongbao/hongbao/metrics"
)

// apiMetrics are the API's own counters: requests, rate limits and refused
// credentials. What is not HTTP's comes from package metrics, one
// definition for serve, settle and embedders alike: the engine's grabs
// and discount calls (it observes the engine, so a grab is counted
// however it came), and the live campaigns read from Redis when scraped.
type apiMetrics struct {
	requests   *prometheus.CounterVec
	reqLatency *prometheus.HistogramVec
	limited    *prometheus.CounterVec
	// authFailures counts requests refused for their credentials.
	authFailures *prometheus.CounterVec
}

// newMetrics registers the API's metrics on reg, with the engine's and
// the campaigns' of package metrics.
func newMetrics(reg prometheus.Registerer, cfg Config, s *Server) *apiMetrics {
	m := &apiMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		reqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hongbao_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: metrics.LatencyBuckets,
		}, []string{"route"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_rate_limited_total",
			Help: "Requests refused by a rate limit, by limit (user, ip, global, auth_failures).",
		}, []string{"limit"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_auth_failures_total",
			Help: "Requests refused for their credentials, by the class the route takes (user, admin, payment, metrics).",
		}, []string{"class"}),
	}
	campaigns := metrics.NewCampaigns(metrics.CampaignsConfig{
		Campaigns: campaignReader{cfg.Engine, cfg.Store}, Backlogs: cfg.Settlement, Discounts: cfg.Discounts,
		SettledCents: cfg.SettledCents, Timeout: cfg.Timeout, Logger: s.log,
	})
	reg.MustRegister(m.requests, m.reqLatency, m.limited, m.authFailures, metrics.NewEngine(cfg.Engine), campaigns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// campaignReader reads the campaigns through the Engine and the
// persistence setting through the Store, which may be apart.
type campaignReader struct {
	Engine
	store Store
}

var _ metrics.CampaignReader = campaignReader{}

// Persistence implements metrics.CampaignReader.
func (c campaignReader) Persistence(ctx context.Context) (string, error) {
	return c.store.Persistence(ctx)
}
