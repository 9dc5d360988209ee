// Package webhook is a settlement sink for hosts that keep their own
// wallet: instead of writing the built-in double-entry ledger, it POSTs
// what the settle worker would have written to a URL of the host's.
//
// # Events
//
// Four kinds of event are sent, each as one JSON object whose "type" names
// it: "fund" (once per campaign, before its first grants), "grants" (a batch
// of grants of one campaign, in the order the worker read them), "refund"
// (once per campaign, when it is settled) and "totals" (a question a
// reconcile asks; it writes nothing). Their bodies are the exported types
// FundEvent, GrantsEvent (of Grant), RefundEvent and TotalsEvent, the
// contract a host decodes; the replies are GrantsReply and TotalsReply.
// Money is always given twice: as integer cents ("cents", "total_cents")
// and as a decimal string with two decimals ("amount": "7.10"). Floats are
// never used.
//
// A host's handler starts with ReadEvent, which reads the body, verifies
// its signature and timestamp, and reads the envelope every event shares
// (type, campaign, owner); Event.Decode then fills the type's struct. The
// example shows a whole handler; package webhooktest is a complete one,
// in memory. A host answers an event type it does not know with 400, so
// that a newer sink's question is never read as an answer. Ping's GET
// (Config.PingURL) carries no event: serve it apart.
//
// # Owner: one wallet's campaigns
//
// Several deployments may share one Redis, each settling into its own
// wallet. A sink declares the wallet it settles into with Config.Name
// (default: DefaultName of its URL), which Identity returns; each
// campaign records at create the identity of what it settles into, and
// the settle worker passes that owner with every call
// (ledger.WithOwner). The sink then sends it as the event's "owner", and
// refuses, before sending anything, a call whose owner is not its own
// name, with a *ledger.ForeignError (ledger.ErrForeign): that money is
// another wallet's. An event without "owner" is of a campaign that
// recorded none (created before owners were recorded).
//
// A receiver should refuse an event whose owner is set and is not its own
// name, with 403: it is a sink configured for another wallet, or pointed
// at the wrong URL, and paying it would pay users twice or drain the wrong
// escrow. The host must therefore know the name its sinks use: set
// Config.Name to a name the host is configured with too, or compute
// DefaultName from the URL the sink is given.
//
// # Totals: reconciling a wallet
//
// Sink.Totals sends {"type":"totals","campaign":"c1"} (and the owner) and
// expects, in a 2xx answer, what the wallet holds of the campaign, each
// idempotency key counted once:
//
//	{"campaign":"c1","funding":"acme","funded_cents":100000,
//	 "grant_count":400,"grant_cents":87654,"refunded_cents":12346,"refunded":true}
//
// "campaign" echoes the question (a reply without it is ErrReply, so a
// host that answers "OK" to everything is not read as holding nothing);
// "refunded" says whether the refund event is held, even one of 0 cents.
// settle.ReconcileSink compares it with what Redis granted, and hongbao
// reconcile --webhook does so from the command line. Each totals request
// has an Idempotency-Key of its own: answer it from the wallet as it is,
// never from a cache.
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
// A host checks both with Verify (or ReadEvent, which calls it), which
// compares in constant time and refuses timestamps outside a window
// (DefaultWindow unless told: the clock skew allowed either way), so a
// captured request cannot be replayed later. Replays inside the window are
// harmless because of the idempotency keys. The signature header may hold
// several comma-separated "v1=" values, so a secret can be rotated by
// signing with both for a while.
package webhook
