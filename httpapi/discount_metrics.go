package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// discountMetrics are the discount routes' counters, and the live discount
// campaigns' confirmed, reserved and remaining amounts, read from Redis at
// scrape time (at most once a second, as the campaign gauges are).
type discountMetrics struct {
	ops     map[string]*prometheus.CounterVec // by operation: reserve, confirm, cancel
	latency prometheus.Histogram
	series  sync.Map // [2]string{op, outcome} -> prometheus.Counter
}

func newDiscountMetrics(reg prometheus.Registerer, e Discounts, timeout time.Duration, log *slog.Logger) *discountMetrics {
	m := &discountMetrics{ops: map[string]*prometheus.CounterVec{}}
	for op, help := range map[string]string{
		"reserve": "Discount reservations answered, by outcome (reserved, already, exhausted, limit, not_open, closed, paused, blocked, expired, cancelled, not_found, busy, outcome_unknown, error).",
		"confirm": "Discount confirms answered, by outcome (confirmed, already_confirmed, expired, cancelled, no_reservation, not_found, busy, outcome_unknown, error).",
		"cancel":  "Discount cancels answered, by outcome (cancelled, already_cancelled, expired, confirmed, no_reservation, not_found, busy, outcome_unknown, error).",
	} {
		m.ops[op] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hongbao_discount_" + op + "s_total", Help: help}, []string{"outcome"})
		reg.MustRegister(m.ops[op])
	}
	for _, o := range []string{"reserved", "already", "exhausted", "limit", "not_open", "closed", "paused", "blocked"} {
		m.ops["reserve"].WithLabelValues(o)
	}
	m.ops["confirm"].WithLabelValues("confirmed")
	m.ops["cancel"].WithLabelValues("cancelled")
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hongbao_discount_reserve_duration_seconds",
		Help:    "Time the engine took to answer a discount reservation, queueing and batching included.",
		Buckets: latencyBuckets,
	})
	reg.MustRegister(m.latency, newDiscountCollector(e, timeout, log))
	return m
}

// count records one answer of op. The labelled series are looked up once
// and kept.
func (m *discountMetrics) count(op, outcome string) {
	key := [2]string{op, outcome}
	c, ok := m.series.Load(key)
	if !ok {
		c, _ = m.series.LoadOrStore(key, m.ops[op].WithLabelValues(outcome))
	}
	c.(prometheus.Counter).Inc()
}

// discountCollector reads the live discount campaigns' counters when
// Prometheus scrapes, reusing a reading for cacheFor.
type discountCollector struct {
	engine  Discounts
	timeout time.Duration
	log     *slog.Logger

	scrapeCache

	descs map[string]*prometheus.Desc
}

// discountGauges name the gauges, by the DiscountStatus field they show.
var discountGauges = []struct{ name, help string }{
	{"confirmed_cents", "Cents of a live discount campaign's confirmed discounts."},
	{"confirmed_count", "Confirmed discounts of a live discount campaign."},
	{"reserved_cents", "Cents held by a live discount campaign's reservations."},
	{"reserved_count", "Reservations held by a live discount campaign."},
	{"remaining_cents", "Cents of a live discount campaign's budget neither confirmed nor reserved (compensation included)."},
	{"remaining_count", "Discounts of a live discount campaign's quota neither confirmed nor reserved."},
	{"compensation_cents", "Cents a live discount campaign's clipping set aside, waiting to top up later discounts."},
}

func newDiscountCollector(e Discounts, timeout time.Duration, log *slog.Logger) *discountCollector {
	c := &discountCollector{engine: e, timeout: timeout, log: log, scrapeCache: scrapeCache{cacheFor: time.Second}, descs: map[string]*prometheus.Desc{}}
	for _, g := range discountGauges {
		c.descs[g.name] = prometheus.NewDesc("hongbao_discount_"+g.name, g.help, []string{"campaign"}, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *discountCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *discountCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.read() {
		ch <- m
	}
}

// read returns the gauges, read again when the last reading is older than
// cacheFor.
func (c *discountCollector) read() []prometheus.Metric {
	return c.cachedRead(c.readRedis)
}

// readRedis reads the gauges; it is not ok when the campaigns could not
// be listed.
func (c *discountCollector) readRedis() ([]prometheus.Metric, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	ids, _, err := c.engine.CampaignsPage(ctx, 0, maxScrapedCampaigns)
	if err != nil {
		c.log.Warn("metrics: listing discount campaigns failed", "err", err)
		return nil, false
	}
	out := []prometheus.Metric{}
	for _, id := range ids {
		st, err := c.engine.Status(ctx, id)
		if err != nil {
			continue // loading, or gone between the listing and the read
		}
		for name, v := range map[string]int64{
			"confirmed_cents": st.ConfirmedCents, "confirmed_count": st.ConfirmedCount,
			"reserved_cents": st.ReservedCents, "reserved_count": st.ReservedCount,
			"remaining_cents": st.RemainingCents, "remaining_count": st.RemainingCount,
			"compensation_cents": st.CompensationCents,
		} {
			out = append(out, prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, float64(v), id))
		}
	}
	return out, true
}
