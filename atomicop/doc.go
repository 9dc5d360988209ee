// Package atomicop holds two small primitives that a plain GET followed by a
// SET gets wrong under concurrency, each decision made by one Lua script in
// Redis.
//
// # Update if newer
//
// Real-time data (a device's status, a price, a position) arrives late and
// out of order. Versioned stores a record only when the incoming version is
// newer than the stored one, so older data that arrives late never
// overwrites newer data:
//
//	v, _ := atomicop.NewVersioned(client, nil)
//	res, err := v.Update(ctx, atomicop.Update{
//		Key:     "{fleet-7}dev-42",
//		Version: eventTimeMillis,
//		Fields:  map[string]string{"status": "charging"},
//		Aggregate: &atomicop.Aggregate{Summary: "by-status", Field: "status"},
//	})
//	// res.Applied: stored, or stale; res.Stored: the version Redis holds.
//
// Versions are int64 in [0, MaxVersion] (2^53 - 1): Lua numbers are doubles,
// exact for integers below 2^53. Go refuses versions outside the range with
// ErrVersionRange and the script checks again. A version equal to the
// stored one is stale: ties are rejected, so the first writer of a version
// wins and a retried update is a no-op.
//
// An optional Aggregate keeps a summary hash in step in the same script: how
// many records of a group hold each value of a field, moved from the old
// value to the new one only when the update applies. UpdateBatch applies
// many updates in one call; their keys share a hash tag, so the call touches
// a single Redis Cluster slot.
//
// # Once-only delivery
//
// When several workers may push the same message, marking it as pushed and
// then pushing loses it if the worker dies in between. Once instead hands
// out a lease with a fencing token (Claim), confirms delivery afterwards
// (Done), hands a message back when the push fails (Release), and lets an
// expired lease be claimed again. No message is lost; a worker that dies
// after pushing and before Done, or stalls past its lease, can cause a
// second push, which the receiver removes by message id. See Once.
//
// # Tokens
//
// A claim's token is the largest of the message's counter plus one, the
// Redis clock in microseconds since the epoch (TIME) and, for ClaimAbove,
// the caller's floor plus one; the counter is raised to it in the same
// script. So:
//
//   - While the counter lives, every claim's token is above the one
//     before, whatever the clocks do.
//   - When the counter is lost or goes back (a failover to a replica that
//     missed the last claims, a restart without persistence, FLUSHALL,
//     the counter's expiry FenceTTL after the last claim), the next token
//     is drawn from the clock of the Redis that now holds the message. The
//     tokens lost with the counter are at most the clock of the Redis that
//     drew them, at their draw, plus the number of claims drawn less than
//     a microsecond apart. The next token is above them all as long as
//     the new clock reads later than the old one did then: the two
//     Redis servers' clocks (or one server's, before and after a step
//     back) differ by less than the time between the last lost claim and
//     the first claim after the loss. A failover Sentinel decides takes
//     down-after-milliseconds at least (seconds) and NTP keeps clocks within
//     milliseconds, so that holds unless a clock is badly wrong.
//   - Tokens are large (16 digits, as the clock in microseconds): compare
//     them, never count with them. MaxToken (2^53 - 1) bounds them.
//
// A clock can be badly wrong (a VM restored from a snapshot, a server
// without time sync). A receiver that records the largest token it took
// and refuses one not above it catches that; whoever was refused claims
// again with ClaimAbove the receiver's record, which lifts the counter
// above it for every later claim too. Package leader does this with
// Config.Fence.
//
// A build before the clock draw takes the counter plus one (INCR). It
// shares the counter, so its tokens stay above every token drawn before
// while the counter lives, and the next claim of this build goes on above
// them; only its own claims after a lost counter start again from 1.
//
// # Errors
//
// Errors wrap the package's sentinels with the operation's name; test them
// with errors.Is. A script's own refusals map to sentinels too
// (ErrVersionRange, ErrCorrupt). ErrOutcomeUnknown means a script's reply
// was lost: it may or may not have run, and every call is safe to retry.
//
// # Keys
//
// Keys are built by the package from a configurable prefix. A record key
// may carry its own hash tag ("{fleet-7}dev-42") to join a group (for a
// batch or a shared summary); a key without braces is its own group. A
// message id becomes the hash tag of its two keys, and must not contain
// braces.
//
// The command "hongbao race update-if-newer|once" runs the naive approach
// and these primitives side by side under load, and counts what each got
// wrong.
package atomicop
