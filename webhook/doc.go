// Package webhook is a settlement sink for hosts that keep their own
// wallet: instead of writing the built-in double-entry ledger, it POSTs
// what the settle worker would have written to a URL of the host's.
//
// # Events
//
// Three kinds of event are sent, each as one JSON object whose "type" names
// it: "fund" (once per campaign, before its first grants), "grants" (a batch
// of grants of one campaign, in the order the worker read them) and
// "refund" (once per campaign, when it is settled). Money is always given
// twice: as integer cents ("cents", "total_cents") and as a decimal string
// with two decimals ("amount": "7.10"). Floats are never used.
//
// # Delivery: at least once
//
// Every event is retried until the host answers 2xx, the attempts run out
// or the caller's context ends. A host can therefore see the same event
// more than once: after a timeout on our side, after a crash of the worker
// between the host's 2xx and the acknowledgement in Redis, or because a
// batch was split and resent after a refusal. The host must dedupe by
// idempotency key and answer a replay with 2xx as if it were new:
//
//   - each grant carries "idempotency_key": "<campaign>/<seq>"; this key is
//     the one that matters, since the same grant can arrive in different
//     batches;
//   - the fund event's key is "<campaign>/fund" and the refund's
//     "<campaign>/refund";
//   - the Idempotency-Key header names the whole request (for a grants
//     batch "<campaign>/grants/<first seq>-<last seq>-<hash>"), which lets
//     a host short-cut an identical resend, nothing more.
//
// Because the host dedupes, a 2xx cannot tell us which grants were new and
// which were replays: ApplyGrants counts every accepted grant as inserted.
// A host that refuses individual grants (for example a packet it already
// holds for another user) answers 2xx with
//
//	{"conflicts":[{"idempotency_key":"c1/7","reason":"packet_taken"}]}
//
// and the worker moves those grants to the campaign's dead stream as
// incidents; the other grants of the batch count as written.
//
// # Status codes
//
// 2xx is delivered. 408, 429 and 5xx, network errors and timeouts are
// retried with exponential backoff and jitter (a Retry-After on such an
// answer, in seconds or as a date, replaces the backoff, capped by
// Config.MaxBackoff). Any other status (3xx included: redirects are not
// followed by default) is a permanent refusal, ErrRejected, not retried;
// the settle worker then splits the batch to find the grant at fault and
// dead-letters it. A 409 on a fund or refund event also
// matches ledger.ErrConflict.
//
// # Signature and replay window
//
// Each attempt is signed afresh with HMAC-SHA256 over the Unix time in
// seconds, a dot and the exact body bytes:
//
//	X-Hongbao-Timestamp: 1767225600
//	X-Hongbao-Signature: v1=hex(hmac_sha256(secret, "1767225600." + body))
//
// A host checks both with Verify, which compares in constant time and
// refuses timestamps outside a window (DefaultWindow unless told), so a
// captured request cannot be replayed later. Replays inside the window are
// harmless because of the idempotency keys. The signature header may hold
// several comma-separated "v1=" values, so a secret can be rotated by
// signing with both for a while.
package webhook
