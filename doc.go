// Package hongbao hands out money and quota under extreme concurrency
// without losing or doubling a cent.
//
// A red packet campaign splits a total into packets ahead of time (integer
// cents, package split), loads them into Redis, and lets each user grab at
// most one. Every grab is decided by one Lua script inside Redis, which
// runs scripts one at a time: checking the user's claim, taking a packet,
// recording the claim, bumping the counters and appending the grant to the
// campaign's stream happen as one step, so no interleaving of clients can
// hand a user two packets or a packet to two users.
//
// A discount campaign (Engine.Discounts().Create) spends a budget over a quota of
// random discounts at payment time, within per-user limits: a payment
// reserves a discount for its order (Discounts.Reserve), then confirms or
// cancels it; a reservation left alone expires and a reaper returns its
// amount. Each of these is one Lua script on the user's home shard;
// docs/discounts.md explains the design and its invariants.
//
// What the engine does is heard by Observers (Config.Observers,
// Engine.Observe): each grab, discount call and batch with its answer and
// latency, and, from a settlement worker, each result of settlement. The
// scheduler's wake-up of settlement is one, package metrics (Prometheus)
// another, an embedder's own hooks more; none replaces another, and an
// engine without any spends nothing on them.
//
// Money is int64 cents everywhere; decimal strings appear only at the
// edges (ParseCents, FormatCents; package money has them for packages that
// do not import the engine).
//
// The invariants, which the tests check against a real redis-server:
//
//  1. A user receives at most one packet per campaign.
//  2. A packet is granted to at most one user.
//  3. total = granted + still in the pool + refunded, to the cent.
//  4. A retried grab returns the same packet, never a second one.
//  5. No grab succeeds before the campaign opens or after it closes
//     (decided by the Redis clock, so every instance agrees).
package hongbao
