package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// maxScrapedCampaigns bounds the per-campaign series of one scrape, and
// the page of the index it reads at a time.
const maxScrapedCampaigns = 200

// latencyBuckets are the bounds, in seconds, of every latency histogram
// of the API: the engine's answers and the requests alike, so that they
// compare bucket by bucket.
var latencyBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5}

// metrics are the service's own counters; the campaign and settlement
// gauges are read from Redis at scrape time by stateCollector.
type metrics struct {
	grabs       *prometheus.CounterVec
	grabLatency prometheus.Histogram
	requests    *prometheus.CounterVec
	reqLatency  *prometheus.HistogramVec
	limited     *prometheus.CounterVec
	// authFailures counts requests refused for their credentials.
	authFailures *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, sc *stateCollector) *metrics {
	m := &metrics{
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_grabs_total",
			Help: "Grabs answered, by outcome (granted, already_granted, sold_out, not_open, closed, paused, blocked, not_found, busy, outcome_unknown, error).",
		}, []string{"outcome"}),
		grabLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hongbao_grab_duration_seconds",
			Help:    "Time the engine took to answer a grab, queueing and batching included.",
			Buckets: latencyBuckets,
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		reqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hongbao_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: latencyBuckets,
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
	for _, o := range []string{"granted", "already_granted", "sold_out", "not_open", "closed", "paused", "blocked"} {
		m.grabs.WithLabelValues(o)
	}
	reg.MustRegister(m.grabs, m.grabLatency, m.requests, m.reqLatency, m.limited, m.authFailures, sc,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// stateCollector reads the engine's batching counters, the settlement
// worker's counters and, through the engine and settle, the live
// campaigns' pools and settlement backlogs, when Prometheus scrapes.
type stateCollector struct {
	engine  Engine
	store   Store
	backlog Settlement
	settle  func() settle.Stats
	settled func(ctx context.Context, id string) (int64, error) // Config.SettledCents
	timeout time.Duration
	log     *slog.Logger

	scrapeCache // the Redis part of a scrape

	batch, poolPackets, poolCents, lag, oldest, dead, conflicts, fsync, scrapeErr *prometheus.Desc
	transfers, moved, refused, failures, foreign                                  *prometheus.Desc
	lagCents, campLag, campLagCents                                               *prometheus.Desc
	paused                                                                        *prometheus.Desc
	waitShort, waitReplicas, waitAcked                                            *prometheus.Desc
}

func newStateCollector(e Engine, store Store, backlog Settlement, st func() settle.Stats, timeout time.Duration, log *slog.Logger) *stateCollector {
	d := prometheus.NewDesc
	return &stateCollector{
		engine: e, store: store, backlog: backlog, settle: st, timeout: timeout, log: log, scrapeCache: scrapeCache{cacheFor: time.Second},
		batch:        d("hongbao_grab_batch_size", "Users per grab script call (the engine's coalescing), since start.", nil, nil),
		poolPackets:  d("hongbao_campaign_pool_remaining_packets", "Packets still in a live campaign's pool.", []string{"campaign"}, nil),
		poolCents:    d("hongbao_campaign_pool_remaining_cents", "Cents still in a live campaign's pool.", []string{"campaign"}, nil),
		paused:       d("hongbao_campaign_paused", "The share of a live campaign's shards an operator paused: 1 paused, 0 running, between while a pause or resume is written or after one was cut short.", []string{"campaign"}, nil),
		lag:          d("hongbao_settlement_lag_entries", "Grants stream entries not yet settled (undelivered + pending), over live campaigns.", nil, nil),
		lagCents:     d("hongbao_settlement_lag_cents", "Cents granted in Redis and not yet in the ledger, over live campaigns (with a ledger).", nil, nil),
		campLag:      d("hongbao_settlement_campaign_lag_entries", "Grants stream entries not yet settled, per live campaign (the first 200 to close).", []string{"campaign"}, nil),
		campLagCents: d("hongbao_settlement_campaign_lag_cents", "Cents granted in Redis and not yet in the ledger, per live campaign (the first 200 to close).", []string{"campaign"}, nil),
		oldest:       d("hongbao_settlement_oldest_pending_seconds", "Age of the oldest grant not yet settled, over live campaigns (0 when none).", nil, nil),
		dead:         d("hongbao_settlement_dead_entries", "Grants in dead streams, waiting for an operator, over live campaigns.", nil, nil),
		transfers:    d("hongbao_shard_transfers_total", "Transfers between the shards of sharded campaigns this process made to refill a dry shard.", nil, nil),
		moved:        d("hongbao_shard_packets_moved_total", "Packets those transfers moved.", nil, nil),
		conflicts:    d("hongbao_settlement_conflicts_total", "Grants the ledger refused as conflicting (incidents), by this process's worker.", nil, nil),
		failures:     d("hongbao_settlement_failures_total", "Settlement passes that failed on Redis or the ledger and were retried after a backoff, by this process's worker.", nil, nil),
		refused:      d("hongbao_settlement_refused_total", "Entries and refunds the ledger refused as impossible (after the refund, beyond the escrow, a refund disagreeing with the grants), by this process's worker.", nil, nil),
		foreign:      d("hongbao_settlement_foreign_total", "Settlement passes over campaigns that record another owner (ledger or sink) than this process's: skipped, never settled here. Another deployment shares the namespace.", nil, nil),
		fsync:        d("hongbao_redis_fsync_always", "1 when Redis has appendonly yes and appendfsync always, else 0.", nil, nil),
		scrapeErr:    d("hongbao_state_scrape_errors", "1 when reading the campaign state from Redis failed in this scrape.", nil, nil),
		waitShort:    d("hongbao_wait_short_total", "WAITs that fewer replicas than --wait-replicas acknowledged in time (a replica behind or missing; the call answers outcome_unknown), by the operation they followed (grab, reserve, confirm, cancel, held, transfer, pause, block).", []string{"op"}, nil),
		waitReplicas: d("hongbao_wait_replicas", "Replicas each WAIT asks for (serve --wait-replicas; 0: no WAIT is sent).", nil, nil),
		waitAcked:    d("hongbao_wait_short_last_acked_replicas", "Replicas that acknowledged the latest WAIT that fell short (0 when none fell short).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.batch, s.poolPackets, s.poolCents, s.lag, s.oldest, s.dead, s.conflicts, s.fsync, s.scrapeErr, s.transfers, s.moved, s.refused,
		s.lagCents, s.campLag, s.campLagCents, s.failures, s.foreign, s.paused, s.waitShort, s.waitReplicas, s.waitAcked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.engine.Stats()
	buckets := map[float64]uint64{}
	var cum uint64
	for _, b := range st.BatchSizes {
		cum += b.Count
		buckets[float64(b.Max)] = cum
	}
	ch <- prometheus.MustNewConstHistogram(s.batch, st.Batches, float64(st.Grabs), buckets)
	ch <- prometheus.MustNewConstMetric(s.transfers, prometheus.CounterValue, float64(st.Transfers))
	ch <- prometheus.MustNewConstMetric(s.moved, prometheus.CounterValue, float64(st.Moved))
	for op, n := range st.WaitShort {
		ch <- prometheus.MustNewConstMetric(s.waitShort, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(s.waitReplicas, prometheus.GaugeValue, float64(st.WaitReplicas))
	ch <- prometheus.MustNewConstMetric(s.waitAcked, prometheus.GaugeValue, float64(st.WaitLastAcked))
	if s.settle != nil {
		st := s.settle()
		ch <- prometheus.MustNewConstMetric(s.conflicts, prometheus.CounterValue, float64(st.Conflicts))
		ch <- prometheus.MustNewConstMetric(s.refused, prometheus.CounterValue, float64(st.Refused))
		ch <- prometheus.MustNewConstMetric(s.failures, prometheus.CounterValue, float64(st.Failures))
		ch <- prometheus.MustNewConstMetric(s.foreign, prometheus.CounterValue, float64(st.Foreign))
	}
	for _, m := range s.redisState() {
		ch <- m
	}
}

// scrapeCache keeps the part of a scrape read from Redis for cacheFor:
// /metrics answers anyone who reaches the listener, and one scrape costs a
// few Redis calls per live campaign (up to 200), so a flood of scrapes
// would otherwise load the Redis that decides grabs. Scrapes that arrive
// together wait for the one reading Redis.
type scrapeCache struct {
	cacheFor time.Duration
	mu       sync.Mutex
	cachedAt time.Time
	cached   []prometheus.Metric
}

// cachedRead returns the last reading while it is younger than cacheFor,
// else read's; a read that is not ok leaves the last reading in place
// and returns it.
func (c *scrapeCache) cachedRead(read func() ([]prometheus.Metric, bool)) []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached != nil && time.Since(c.cachedAt) < c.cacheFor {
		return c.cached
	}
	out, ok := read()
	if !ok {
		return c.cached
	}
	c.cached, c.cachedAt = out, time.Now()
	return out
}

// redisState returns the metrics read from Redis, read again when the last
// reading is older than cacheFor.
func (s *stateCollector) redisState() []prometheus.Metric {
	return s.cachedRead(s.readRedis)
}

// readRedis reads the metrics of the Redis part of a scrape.
func (s *stateCollector) readRedis() ([]prometheus.Metric, bool) {
	ms := make(chan prometheus.Metric, 16)
	var out []prometheus.Metric
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ms {
			out = append(out, m)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if v, ok := s.fsyncAlways(ctx); ok {
		ms <- prometheus.MustNewConstMetric(s.fsync, prometheus.GaugeValue, v)
	}
	failed := 0.0
	if err := s.campaigns(ctx, ms); err != nil {
		s.log.Warn("metrics: reading campaign state failed", "err", err)
		failed = 1
	}
	ms <- prometheus.MustNewConstMetric(s.scrapeErr, prometheus.GaugeValue, failed)
	close(ms)
	<-done
	return out, true
}

// fsyncAlways reads the persistence settings; ok is false when they
// cannot be read.
func (s *stateCollector) fsyncAlways(ctx context.Context) (float64, bool) {
	p, err := s.store.Persistence(ctx)
	if err != nil {
		return 0, false
	}
	if p == "always" {
		return 1, true
	}
	return 0, true
}

// campaigns sends the pool and backlog gauges of the first
// maxScrapedCampaigns campaigns (those that close first) and the
// settlement gauges summed over every live campaign: an alert on the
// backlog must not miss the 201st. The index is read a page at a time.
// A campaign that cannot be read is an error of the scrape (the first is
// returned), but the others are still summed and the totals still sent:
// a series that vanished would silence its alert, while a figure short
// of one campaign comes with hongbao_state_scrape_errors 1.
func (s *stateCollector) campaigns(ctx context.Context, ch chan<- prometheus.Metric) error {
	var tot backlogSum
	var failed error
	for offset := 0; ; {
		ids, total, err := s.engine.CampaignsPage(ctx, offset, maxScrapedCampaigns)
		if err != nil {
			failed = err
			break
		}
		for _, id := range ids {
			if err := s.campaign(ctx, ch, id, offset == 0, &tot); err != nil && failed == nil {
				failed = fmt.Errorf("campaign %s: %w", id, err)
			}
		}
		offset += len(ids)
		if len(ids) == 0 || offset >= total {
			break
		}
	}
	ch <- prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, float64(tot.lag))
	ch <- prometheus.MustNewConstMetric(s.dead, prometheus.GaugeValue, float64(tot.dead))
	ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, tot.oldest)
	if s.settled != nil {
		ch <- prometheus.MustNewConstMetric(s.lagCents, prometheus.GaugeValue, float64(tot.cents))
	}
	return failed
}

// backlogSum adds up the settlement backlog over campaigns.
type backlogSum struct {
	lag, dead, cents int64
	oldest           float64
}

// campaign reads one campaign's backlog into tot, and sends its own gauges
// when first (in the first page). Its backlog in cents reads the ledger
// before Redis: grants settled between the two reads count as unsettled,
// so the figure may run a little high, never below the truth.
func (s *stateCollector) campaign(ctx context.Context, ch chan<- prometheus.Metric, id string, first bool, tot *backlogSum) error {
	var settled int64
	if s.settled != nil {
		c, err := s.settled(ctx, id)
		if err != nil {
			return err
		}
		settled = c
	}
	var st *hongbao.Status
	if first || s.settled != nil {
		var err error
		if st, err = s.engine.Status(ctx, id); err != nil {
			return nil // still loading, or gone between the listing and the read
		}
	}
	if first {
		ch <- prometheus.MustNewConstMetric(s.poolPackets, prometheus.GaugeValue, float64(st.RemainingCount), id)
		ch <- prometheus.MustNewConstMetric(s.poolCents, prometheus.GaugeValue, float64(st.RemainingCents), id)
		ch <- prometheus.MustNewConstMetric(s.paused, prometheus.GaugeValue, float64(st.PausedShards)/float64(max(st.Shards, 1)), id)
	}
	b, err := s.backlog.ReadBacklog(ctx, id)
	if errors.Is(err, settle.ErrNoCampaign) {
		return nil // settled and gone since the listing
	}
	if err != nil {
		return err
	}
	tot.lag += b.Unsettled()
	tot.dead += b.Dead
	tot.oldest = max(tot.oldest, b.Oldest.Seconds())
	if first {
		ch <- prometheus.MustNewConstMetric(s.campLag, prometheus.GaugeValue, float64(b.Unsettled()), id)
	}
	if s.settled != nil {
		cents := max(st.GrantedCents-settled, 0)
		tot.cents += cents
		if first {
			ch <- prometheus.MustNewConstMetric(s.campLagCents, prometheus.GaugeValue, float64(cents), id)
		}
	}
	return nil
}
