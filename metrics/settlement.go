package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao/settle"
)

// StatsReader is what NewSettlement needs of a settlement worker: a
// *settle.Worker.
type StatsReader interface {
	Stats() settle.Stats
}

// settlementCounters are the counters of settle.Stats exported, by name.
var settlementCounters = []struct {
	name, help string
	value      func(settle.Stats) int64
}{
	{"hongbao_settlement_grants_total", "Grants this process's settlement worker newly wrote to the ledger or sink.",
		func(s settle.Stats) int64 { return s.Grants }},
	{"hongbao_settlement_discounts_total", "Confirmed discounts this process's settlement worker newly wrote to the ledger.",
		func(s settle.Stats) int64 { return s.Discounts }},
	{"hongbao_settlement_replayed_total", "Grants and discounts the ledger already had when this process's worker wrote them again (replays after a crash or a reclaim; harmless).",
		func(s settle.Stats) int64 { return s.Replayed }},
	{"hongbao_settlement_conflicts_total", "Grants the ledger refused as conflicting (incidents), by this process's worker.",
		func(s settle.Stats) int64 { return s.Conflicts }},
	{"hongbao_settlement_refused_total", "Entries and refunds the ledger refused as impossible (after the refund, beyond the escrow, a refund disagreeing with the grants), by this process's worker.",
		func(s settle.Stats) int64 { return s.Refused }},
	{"hongbao_settlement_malformed_total", "Stream entries that could not be read, or that the ledger refused as invalid, moved to a dead stream by this process's worker (incidents).",
		func(s settle.Stats) int64 { return s.Malformed }},
	{"hongbao_settlement_deleted_total", "Pending stream entries Redis reported deleted before this process's worker settled them (alarms).",
		func(s settle.Stats) int64 { return s.Deleted }},
	{"hongbao_settlement_failures_total", "Settlement passes that failed on Redis or the ledger and were retried after a backoff, by this process's worker.",
		func(s settle.Stats) int64 { return s.Failures }},
	{"hongbao_settlement_foreign_total", "Settlement passes over campaigns that record another owner (ledger or sink) than this process's: skipped, never settled here. Another deployment shares the namespace.",
		func(s settle.Stats) int64 { return s.Foreign }},
	{"hongbao_settlement_refunds_total", "Campaigns this process's worker refunded and settled.",
		func(s settle.Stats) int64 { return s.Refunds }},
	{"hongbao_settlement_reaped_total", "Discount reservations whose hold had passed that this process's reaper expired.",
		func(s settle.Stats) int64 { return s.Reaped }},
}

// Settlement collects a settlement worker's counters (settle.Stats), read
// when scraped: what this process settled, replayed, refused, failed on,
// skipped as foreign, refunded and reaped. Use NewSettlement, or
// NewScheduler for a scheduler's worker.
type Settlement struct {
	w     StatsReader
	descs []*prometheus.Desc
}

// NewSettlement returns the collector of w's counters.
func NewSettlement(w StatsReader) *Settlement {
	m := &Settlement{w: w}
	for _, c := range settlementCounters {
		m.descs = append(m.descs, prometheus.NewDesc(c.name, c.help, nil, nil))
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Settlement) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Settlement) Collect(ch chan<- prometheus.Metric) {
	st := m.w.Stats()
	for i, c := range settlementCounters {
		ch <- prometheus.MustNewConstMetric(m.descs[i], prometheus.CounterValue, float64(c.value(st)))
	}
}

// Scheduler collects a scheduler's metrics: whether this process holds
// the lease, the deployment's parts and those this process holds, and its
// worker's settlement counters (as NewSettlement). A process that runs no
// scheduler (serve --settle=false) registers none: it performs none of
// the scheduler's duties, and a lease gauge at 0 there would claim a
// missing scheduler. Use NewScheduler.
type Scheduler struct {
	settlement *Settlement
	held       prometheus.GaugeFunc
	parts      prometheus.GaugeFunc
	partsHeld  prometheus.GaugeFunc
}

// SchedulerReader is what NewScheduler reads of a scheduler: a
// *scheduler.Scheduler.
type SchedulerReader interface {
	// IsLeader says whether this process holds the lease, or a part.
	IsLeader() bool
	// HeldParts lists the parts this process holds.
	HeldParts() []int
	// Parts is the deployment's number of parts.
	Parts() int
	// Worker is the scheduler's settlement worker.
	Worker() *settle.Worker
}

// NewScheduler returns the collector of s's metrics and its worker's.
func NewScheduler(s SchedulerReader) *Scheduler {
	return &Scheduler{
		settlement: NewSettlement(s.Worker()),
		held: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hongbao_scheduler_lease_held",
			Help: "1 while this process holds the scheduler lease, or with --settle-parts above 1 at least one part (runs settlement, closes on time, refunds and reaps); 0 while it waits for it. Only processes that run a scheduler export it.",
		}, func() float64 {
			if s.IsLeader() {
				return 1
			}
			return 0
		}),
		parts: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hongbao_scheduler_parts",
			Help: "The deployment's number of settlement parts (--settle-parts).",
		}, func() float64 { return float64(s.Parts()) }),
		partsHeld: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hongbao_scheduler_parts_held",
			Help: "Settlement parts this process holds now (with one part: 1 while it holds the lease).",
		}, func() float64 { return float64(len(s.HeldParts())) }),
	}
}

// Describe implements prometheus.Collector.
func (m *Scheduler) Describe(ch chan<- *prometheus.Desc) {
	m.settlement.Describe(ch)
	for _, g := range []prometheus.GaugeFunc{m.held, m.parts, m.partsHeld} {
		g.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Scheduler) Collect(ch chan<- prometheus.Metric) {
	m.settlement.Collect(ch)
	for _, g := range []prometheus.GaugeFunc{m.held, m.parts, m.partsHeld} {
		g.Collect(ch)
	}
}
