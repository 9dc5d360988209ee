// Package metrics holds hongbao's Prometheus collectors, for every process
// that runs the library: serve and hongbao settle register them, and so
// can a service that embeds an Engine or a Scheduler, on its own registry.
// Each process exports the metrics of the duties it performs:
//
//   - NewEngine: an engine's grabs and discount calls (outcomes,
//     latency), its batches (sizes, durations), its WAITs that fell short
//     and its transfers between shards. It observes the engine
//     (hongbao.Observer), beside any other observer.
//   - NewCampaigns: what Redis holds of the live campaigns, read when
//     Prometheus scrapes (at most once a second): pools, pauses, the
//     settlement backlog in entries, cents and age, dead entries, discount
//     budgets, and whether Redis fsyncs every write.
//   - NewSettlement: a settlement worker's counters (grants settled,
//     replays, conflicts, refusals, failed passes, foreign campaigns,
//     refunds, reaped reservations).
//   - NewScheduler: a scheduler's lease and parts, with its worker's
//     settlement counters.
//   - NewLedger: whether the process reaches its ledger
//     (hongbao_ledger_up), which serve and settle both export: an outage
//     of it degrades them and does not stop them, so their readiness
//     does not say it.
//
// The metric names and labels are those deploy/prometheus/alerts.yml and
// the Grafana dashboard query; tests hold them to each other. The core
// packages (hongbao, settle, scheduler) do not import Prometheus: this
// package reads them through their Stats and their observers.
package metrics
