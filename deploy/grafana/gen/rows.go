package main

// The panels, row by row. Every metric named here is one hongbao exports
// (package metrics, which serve and settle register, and
// httpapi/metrics.go); a test of the main module starts serve alone, then
// serve --settle=false beside hongbao settle, scrapes them and fails on a
// name that neither topology exports. Several serve processes report the
// same campaign gauges (read from the shared Redis), so those are taken
// with max, never summed; counters are per process and summed, and the
// scheduler's series come only from the processes that run one.

// one is a threshold value.
func one() *float64 { v := 1.0; return &v }

// rows are the dashboard's rows, top to bottom.
func rows() []row {
	return []row{trafficRow(), campaignRow(), settlementRow(), errorRow()}
}

func trafficRow() row {
	return row{title: "Traffic", panels: []panel{
		{title: "Grabs per second by outcome", unit: "reqps", stack: true,
			help:    "Grab answers of red packet campaigns, by outcome: the label is the answer's outcome as the API spells it, or the error's code (the metric hongbao_grabs_total lists them).",
			queries: []query{q(`sum by (outcome) (rate(hongbao_grabs_total`+rate+`))`, "{{outcome}}")}},
		{title: "Discount answers per second by outcome", unit: "reqps", stack: true,
			help: "Reserve, confirm and cancel answers of discount campaigns, by outcome: the label is the answer's outcome as the API spells it, or the error's code (the metrics hongbao_discount_*s_total list them).",
			queries: []query{
				q(`sum by (outcome) (rate(hongbao_discount_reserves_total`+rate+`))`, "reserve {{outcome}}"),
				q(`sum by (outcome) (rate(hongbao_discount_confirms_total`+rate+`))`, "confirm {{outcome}}"),
				q(`sum by (outcome) (rate(hongbao_discount_cancels_total`+rate+`))`, "cancel {{outcome}}"),
			}},
		{title: "HTTP requests per second by status", unit: "reqps", stack: true,
			help:    "Every HTTP request serve answered, by status code.",
			queries: []query{q(`sum by (code) (rate(hongbao_http_requests_total`+rate+`))`, "{{code}}")}},
		{title: "Grab and reserve latency, p50 and p99", unit: "s",
			help: "Time the engine took to answer a grab or a discount reservation, queueing and batching included.",
			queries: []query{
				q(quantile("0.5", "hongbao_grab_duration_seconds_bucket", ""), "grab p50"),
				q(quantile("0.99", "hongbao_grab_duration_seconds_bucket", ""), "grab p99"),
				q(quantile("0.5", "hongbao_discount_reserve_duration_seconds_bucket", ""), "reserve p50"),
				q(quantile("0.99", "hongbao_discount_reserve_duration_seconds_bucket", ""), "reserve p99"),
			}},
		{title: "HTTP latency p99 by route", unit: "s",
			help:    "Time to answer an HTTP request, 99th percentile, by route pattern.",
			queries: []query{q(quantile("0.99", "hongbao_http_request_duration_seconds_bucket", "route"), "{{route}}")}},
		{title: "Users per grab script call", unit: "short",
			help: "Grabs carried by each grab script call (the engine's coalescing): near 1 when traffic is light, up to the batch limit in a rush.",
			queries: []query{q(`sum(rate(hongbao_grab_batch_size_sum`+rate+`)) / sum(rate(hongbao_grab_batch_size_count`+rate+`))`,
				"users per call")}},
	}}
}

// quantile is a percentile of a histogram's buckets over every process,
// kept apart by the label by when it is not empty.
func quantile(phi, bucket, by string) string {
	if by != "" {
		by = ", " + by
	}
	return `histogram_quantile(` + phi + `, sum by (le` + by + `) (rate(` + bucket + rate + `)))`
}

func campaignRow() row {
	return row{title: "Campaigns", panels: []panel{
		{title: "Pool left (packets)", unit: "short", width: 6,
			help:    "Packets still in each live red packet campaign's pool (the 200 that close first).",
			queries: []query{q(`max by (campaign) (hongbao_campaign_pool_remaining_packets)`, "{{campaign}}")}},
		{title: "Pool left (cents)", unit: "short", width: 6,
			help:    "Cents still in each live red packet campaign's pool.",
			queries: []query{q(`max by (campaign) (hongbao_campaign_pool_remaining_cents)`, "{{campaign}}")}},
		{title: "Discount budget (cents)", unit: "short", width: 6,
			help: "Each live discount campaign's budget: remaining (neither confirmed nor reserved), reserved, confirmed, and the compensation its clipping set aside.",
			queries: []query{
				q(`max by (campaign) (hongbao_discount_remaining_cents)`, "{{campaign}} remaining"),
				q(`max by (campaign) (hongbao_discount_reserved_cents)`, "{{campaign}} reserved"),
				q(`max by (campaign) (hongbao_discount_confirmed_cents)`, "{{campaign}} confirmed"),
				q(`max by (campaign) (hongbao_discount_compensation_cents)`, "{{campaign}} compensation"),
			}},
		{title: "Discount quota (discounts)", unit: "short", width: 6,
			help: "Each live discount campaign's quota: remaining, reserved and confirmed discounts.",
			queries: []query{
				q(`max by (campaign) (hongbao_discount_remaining_count)`, "{{campaign}} remaining"),
				q(`max by (campaign) (hongbao_discount_reserved_count)`, "{{campaign}} reserved"),
				q(`max by (campaign) (hongbao_discount_confirmed_count)`, "{{campaign}} confirmed"),
			}},
	}}
}

func settlementRow() row {
	return row{title: "Settlement", panels: []panel{
		{title: "Settlement backlog (entries)", unit: "short", width: 6,
			help: "Grant stream entries not yet in the ledger: over every live campaign, and per campaign (the 200 that close first).",
			queries: []query{
				q(`max(hongbao_settlement_lag_entries)`, "all campaigns"),
				q(`max by (campaign) (hongbao_settlement_campaign_lag_entries)`, "{{campaign}}"),
			}},
		{title: "Settlement backlog (cents)", unit: "short", width: 6,
			help: "Cents granted in Redis and not yet in the ledger: what users hold that the ledger does not show yet.",
			queries: []query{
				q(`max(hongbao_settlement_lag_cents)`, "all campaigns"),
				q(`max by (campaign) (hongbao_settlement_campaign_lag_cents)`, "{{campaign}}"),
			}},
		{title: "Settlement lag", unit: "s", width: 6,
			help:    "Age of the oldest grant not yet settled (0 when none). It grows when the ledger is down or no process holds the scheduler lease.",
			queries: []query{q(`max(hongbao_settlement_oldest_pending_seconds)`, "oldest unsettled grant")}},
		{title: "Dead entries", unit: "short", width: 3, stat: true, alarm: one(),
			help:    "Grants in dead streams, waiting for an operator (hongbao settle --redrive after the cause is fixed).",
			queries: []query{q(`max(hongbao_settlement_dead_entries)`, "dead entries")}},
		{title: "Scheduler lease holders", unit: "short", width: 3, stat: true, healthy: one(),
			help:    "Processes holding the scheduler lease (settlement, close on time, refunds), or with --settle-parts above 1 a part: 1 is right (up to the parts with parts), 0 means nothing settles. Only the processes that run a scheduler (serve with settlement, hongbao settle) report it.",
			queries: []query{q(`sum(hongbao_scheduler_lease_held)`, "holders")}},
		{title: "Settled per second", unit: "ops", width: 12,
			help: "Grants and confirmed discounts the scheduler processes wrote to the ledger or sink, and replays: writes the ledger already had (after a crash or a reclaim; harmless).",
			queries: []query{
				q(`sum(rate(hongbao_settlement_grants_total`+rate+`))`, "grants"),
				q(`sum(rate(hongbao_settlement_discounts_total`+rate+`))`, "discounts"),
				q(`sum(rate(hongbao_settlement_replayed_total`+rate+`))`, "replayed"),
			}},
		{title: "Scheduler processes and parts", unit: "short", width: 12,
			help: "Processes that run a scheduler (serve with settlement, hongbao settle), the settlement parts they hold together and the deployment's parts: fewer held than parts means a part nobody settles; no process at all, that nothing settles, closes or refunds.",
			queries: []query{
				q(`count(hongbao_scheduler_lease_held)`, "scheduler processes"),
				q(`sum(hongbao_scheduler_parts_held)`, "parts held"),
				q(`max(hongbao_scheduler_parts)`, "parts"),
			}},
	}}
}

func errorRow() row {
	return row{title: "Errors", panels: []panel{
		{title: "Failed calls", unit: "reqps",
			help: "Grabs and discount calls that failed on Redis (error), were shed or refused before running (busy), or met a Redis that takes no writes or an unreachable ledger they needed (unavailable).",
			queries: []query{
				q(`sum by (outcome) (rate(hongbao_grabs_total{outcome=~"error|busy|unavailable"}`+rate+`))`, "grab {{outcome}}"),
				q(`sum by (outcome) (rate(hongbao_discount_reserves_total{outcome=~"error|busy|unavailable"}`+rate+`))`, "reserve {{outcome}}"),
				q(`sum by (outcome) (rate(hongbao_discount_confirms_total{outcome=~"error|busy|unavailable"}`+rate+`))`, "confirm {{outcome}}"),
				q(`sum by (outcome) (rate(hongbao_discount_cancels_total{outcome=~"error|busy|unavailable"}`+rate+`))`, "cancel {{outcome}}"),
			}},
		{title: "Settlement and ledger errors", unit: "short",
			help: "Over the interval: settlement passes that failed on Redis or the ledger (retried after a backoff; a ledger that is down shows here and as a growing lag), and entries the ledger refused: conflicts (a packet recorded for another user, an incident) and impossible ones (after the refund, beyond the escrow).",
			queries: []query{
				q(`sum(increase(hongbao_settlement_failures_total`+rate+`))`, "failed passes"),
				q(`sum(increase(hongbao_settlement_conflicts_total`+rate+`))`, "conflicts"),
				q(`sum(increase(hongbao_settlement_refused_total`+rate+`))`, "refused as impossible"),
			}},
		{title: "Outcome unknown (WAIT short, reply lost)", unit: "reqps",
			help: "Calls answered outcome unknown: a WAIT that fewer replicas than --wait-replicas acknowledged in time, or a reply lost on the way. Safe to retry: a retry returns the same packet or reservation. Steady values with --wait-replicas mean replicas lag or are missing.",
			queries: []query{
				q(`sum(rate(hongbao_grabs_total{outcome="outcome_unknown"}`+rate+`))`, "grab"),
				q(`sum(rate(hongbao_discount_reserves_total{outcome="outcome_unknown"}`+rate+`))`, "reserve"),
				q(`sum(rate(hongbao_discount_confirms_total{outcome="outcome_unknown"}`+rate+`))`, "confirm"),
				q(`sum(rate(hongbao_discount_cancels_total{outcome="outcome_unknown"}`+rate+`))`, "cancel"),
			}},
		{title: "WAIT shortfalls by operation", unit: "short", width: 16,
			help:    "Over the interval: WAITs that fewer replicas than --wait-replicas acknowledged in time, by the operation they followed (one WAIT covers a whole batch of grabs or discount calls, each answered outcome unknown). Steady values mean a replica is behind or gone, not the network: look at the replicas' link and lag (INFO replication).",
			queries: []query{q(`sum by (op) (increase(hongbao_wait_short_total`+rate+`))`, "{{op}}")}},
		{title: "Replicas per WAIT", unit: "short", stat: true,
			help: "Asked: the replicas each WAIT waits for (--wait-replicas; 0 sends no WAIT). Acknowledged: how many replicas acknowledged the latest WAIT that fell short (the most over the processes; 0 when none fell short, or when every replica was gone).",
			queries: []query{
				q(`max(hongbao_wait_replicas)`, "asked"),
				q(`max(hongbao_wait_short_last_acked_replicas)`, "acknowledged by the last short WAIT"),
			}},
		{title: "Redis durable and readable", unit: "short", stat: true, healthy: one(),
			help: "1 and 1 are right. fsync always: Redis has appendonly yes and appendfsync always (else a Redis crash can lose acknowledged grants). State readable: serve could read the campaign state for its last scrape.",
			queries: []query{
				q(`min(hongbao_redis_fsync_always)`, "fsync always"),
				q(`1 - max(hongbao_state_scrape_errors)`, "state readable"),
			}},
		{title: "Failed authentication per second", unit: "reqps",
			help:    "Requests refused for their credentials, by the class the route takes (user, admin, payment, metrics).",
			queries: []query{q(`sum by (class) (rate(hongbao_auth_failures_total`+rate+`))`, "{{class}}")}},
		{title: "5xx share of HTTP requests", unit: "percentunit",
			help: "Share of HTTP requests answered with a 5xx status.",
			queries: []query{q(`sum(rate(hongbao_http_requests_total{code=~"5.."}`+rate+`)) / sum(rate(hongbao_http_requests_total`+rate+`))`,
				"5xx")}},
	}}
}
