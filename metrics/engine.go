package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao"
)

// LatencyBuckets are the bounds, in seconds, of every latency histogram
// of hongbao: the engine's answers, its batches and the API's requests
// alike, so that they compare bucket by bucket.
var LatencyBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5}

// Observed is what NewEngine needs of an engine: a *hongbao.Engine.
type Observed interface {
	// Observe adds an observer to the engine (hongbao.Engine.Observe).
	Observe(o hongbao.Observer) (remove func())
	// Stats reads the engine's batching, WAIT and transfer counters.
	Stats() hongbao.Stats
}

// Engine collects an engine's metrics: it counts what it hears as one of
// the engine's observers (grabs and discount calls by outcome, their
// latency, batch durations) and reads the engine's Stats when scraped
// (batch sizes, WAITs that fell short, transfers between shards). Use
// NewEngine; register it on a prometheus.Registerer; Close stops
// observing.
type Engine struct {
	stats  func() hongbao.Stats
	remove func()

	grabs       *prometheus.CounterVec
	grabLatency prometheus.Histogram
	outcomes    [hongbao.MaxOutcomeCode]prometheus.Counter // the answered outcomes' series, by Outcome
	errs        sync.Map                                   // error label -> prometheus.Counter

	discounts      map[hongbao.DiscountOp]*prometheus.CounterVec
	reserveLatency prometheus.Histogram
	discountSeries sync.Map // [2]string{op, label} -> prometheus.Counter

	batchDuration *prometheus.HistogramVec
	batchOps      sync.Map // op -> prometheus.Observer

	batch, transfers, moved, waitShort, waitReplicas, waitAcked *prometheus.Desc
}

// NewEngine returns the collector of e's metrics, observing e from now
// on (Observe: the engine's other observers stay).
func NewEngine(e Observed) *Engine {
	m := newEngine(e.Stats)
	m.remove = e.Observe(m)
	return m
}

func newEngine(stats func() hongbao.Stats) *Engine {
	d := prometheus.NewDesc
	m := &Engine{
		stats: stats,
		grabs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hongbao_grabs_total",
			Help: "Grabs answered, by outcome (" + outcomeLabels(hongbao.CallGrab) + ", not_found, busy, outcome_unknown, unavailable, error).",
		}, []string{"outcome"}),
		grabLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hongbao_grab_duration_seconds",
			Help:    "Time the engine took to answer a grab, queueing and batching included.",
			Buckets: LatencyBuckets,
		}),
		discounts: map[hongbao.DiscountOp]*prometheus.CounterVec{},
		reserveLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hongbao_discount_reserve_duration_seconds",
			Help:    "Time the engine took to answer a discount reservation, queueing and batching included.",
			Buckets: LatencyBuckets,
		}),
		batchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hongbao_batch_duration_seconds",
			Help:    "Time one batch of coalesced calls took in Redis (its script calls, WAITs and refills of dry shards), by operation (grab, reserve, confirm, cancel).",
			Buckets: LatencyBuckets,
		}, []string{"op"}),
		batch:        d("hongbao_grab_batch_size", "Users per grab script call (the engine's coalescing), since start.", nil, nil),
		transfers:    d("hongbao_shard_transfers_total", "Transfers between the shards of sharded campaigns this process made to refill a dry shard.", nil, nil),
		moved:        d("hongbao_shard_packets_moved_total", "Packets those transfers moved.", nil, nil),
		waitShort:    d("hongbao_wait_short_total", "WAITs that fewer replicas than --wait-replicas acknowledged in time (a replica behind or missing; the call answers outcome_unknown), by the operation they followed (grab, reserve, confirm, cancel, held, transfer, pause, block).", []string{"op"}, nil),
		waitReplicas: d("hongbao_wait_replicas", "Replicas each WAIT asks for (serve --wait-replicas; 0: no WAIT is sent).", nil, nil),
		waitAcked:    d("hongbao_wait_short_last_acked_replicas", "Replicas that acknowledged the latest WAIT that fell short (0 when none fell short).", nil, nil),
	}
	for _, o := range hongbao.GrabOutcomes() {
		m.outcomes[o] = m.grabs.WithLabelValues(o.Label())
	}
	for op, help := range map[hongbao.DiscountOp]string{
		hongbao.OpReserve: "Discount reservations answered, by outcome (" + outcomeLabels(hongbao.CallReserve) + ", expired, cancelled, not_found, busy, outcome_unknown, unavailable, error).",
		hongbao.OpConfirm: "Discount confirms answered, by outcome (confirmed, already_confirmed, expired, cancelled, no_reservation, not_found, busy, outcome_unknown, unavailable, error).",
		hongbao.OpCancel:  "Discount cancels answered, by outcome (cancelled, already_cancelled, expired, confirmed, no_reservation, not_found, busy, outcome_unknown, unavailable, error).",
	} {
		m.discounts[op] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hongbao_discount_" + op.String() + "s_total", Help: help}, []string{"outcome"})
	}
	for _, o := range hongbao.ReserveOutcomes() {
		m.discounts[hongbao.OpReserve].WithLabelValues(o.Label())
	}
	m.discounts[hongbao.OpConfirm].WithLabelValues("confirmed")
	m.discounts[hongbao.OpCancel].WithLabelValues("cancelled")
	return m
}

// outcomeLabels lists the metric labels of call's outcomes (OutcomeTable),
// for a metric's help text.
func outcomeLabels(call hongbao.OutcomeCall) string {
	var out []string
	for _, r := range hongbao.OutcomeTable() {
		if r.Call == call {
			out = append(out, r.Label)
		}
	}
	return strings.Join(out, ", ")
}

// Close stops observing the engine; what was counted stays exported.
func (m *Engine) Close() {
	if m.remove != nil {
		m.remove()
	}
}

// ObserveGrab counts a grab under its outcome and its latency. It
// allocates nothing once the outcome's series exists.
func (m *Engine) ObserveGrab(ev hongbao.GrabEvent) {
	m.grabLatency.Observe(ev.Duration.Seconds())
	if ev.Err == nil && int(ev.Grant.Outcome) < len(m.outcomes) && m.outcomes[ev.Grant.Outcome] != nil {
		m.outcomes[ev.Grant.Outcome].Inc()
		return
	}
	label := GrabLabel(ev)
	c, ok := m.errs.Load(label)
	if !ok {
		c, _ = m.errs.LoadOrStore(label, m.grabs.WithLabelValues(label))
	}
	c.(prometheus.Counter).Inc()
}

// ObserveDiscount counts a discount call under its operation and
// outcome, and a reservation's latency.
func (m *Engine) ObserveDiscount(ev hongbao.DiscountEvent) {
	vec, ok := m.discounts[ev.Op]
	if !ok {
		return
	}
	if ev.Op == hongbao.OpReserve {
		m.reserveLatency.Observe(ev.Duration.Seconds())
	}
	label := DiscountLabel(ev)
	key := [2]string{ev.Op.String(), label}
	c, ok := m.discountSeries.Load(key)
	if !ok {
		c, _ = m.discountSeries.LoadOrStore(key, vec.WithLabelValues(label))
	}
	c.(prometheus.Counter).Inc()
}

// ObserveBatch records a batch's duration under its operation.
func (m *Engine) ObserveBatch(ev hongbao.BatchEvent) {
	h, ok := m.batchOps.Load(ev.Op)
	if !ok {
		h, _ = m.batchOps.LoadOrStore(ev.Op, m.batchDuration.WithLabelValues(ev.Op))
	}
	h.(prometheus.Observer).Observe(ev.Duration.Seconds())
}

// ObserveSettle does nothing: settlement has its own collectors
// (NewSettlement, NewScheduler).
func (m *Engine) ObserveSettle(hongbao.SettleEvent) {}

// Describe implements prometheus.Collector.
func (m *Engine) Describe(ch chan<- *prometheus.Desc) {
	m.grabs.Describe(ch)
	m.grabLatency.Describe(ch)
	for _, v := range m.discounts {
		v.Describe(ch)
	}
	m.reserveLatency.Describe(ch)
	m.batchDuration.Describe(ch)
	for _, d := range []*prometheus.Desc{m.batch, m.transfers, m.moved, m.waitShort, m.waitReplicas, m.waitAcked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Engine) Collect(ch chan<- prometheus.Metric) {
	m.grabs.Collect(ch)
	m.grabLatency.Collect(ch)
	for _, v := range m.discounts {
		v.Collect(ch)
	}
	m.reserveLatency.Collect(ch)
	m.batchDuration.Collect(ch)
	st := m.stats()
	buckets := map[float64]uint64{}
	var cum uint64
	for _, b := range st.BatchSizes {
		cum += b.Count
		buckets[float64(b.Max)] = cum
	}
	ch <- prometheus.MustNewConstHistogram(m.batch, st.Batches, float64(st.Grabs), buckets)
	ch <- prometheus.MustNewConstMetric(m.transfers, prometheus.CounterValue, float64(st.Transfers))
	ch <- prometheus.MustNewConstMetric(m.moved, prometheus.CounterValue, float64(st.Moved))
	for op, n := range st.WaitShort {
		ch <- prometheus.MustNewConstMetric(m.waitShort, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(m.waitReplicas, prometheus.GaugeValue, float64(st.WaitReplicas))
	ch <- prometheus.MustNewConstMetric(m.waitAcked, prometheus.GaugeValue, float64(st.WaitLastAcked))
}
