// Package client calls a hongbao service over HTTP: typed calls for every
// route of its OpenAPI document (httpapi/openapi.json), the service's error
// shape as Go errors, and the service's retry protocol built in.
//
// A Client carries one credential: a user's token (grab, held packet), the
// payment key (reserve, confirm, cancel) or an admin key (everything). As
// returns a copy that sends another credential over the same connections,
// so one Client serves many users.
//
// # Module and dependencies
//
// The client is a module of its own, github.com/hongbao/hongbao/client,
// so that a program that calls the API does not require the service's
// dependencies (Redis, SQL drivers, Prometheus, the test harness: 66
// modules when the client was a package of the service's module). The
// module requires github.com/golang-jwt/jwt/v5, for package token, which
// signs users' tokens, and connectrpc.com/connect and
// google.golang.org/protobuf for packages hongbaov1 and hongbaov1connect,
// the Connect and gRPC procedures generated from the service's proto
// files, which package client calls under Options.Protocol.
//
// It does not depend on OpenTelemetry either: that would add about ten
// modules to every program's module graph for one header. A program that
// traces hands its propagator to Options.Propagate, and the service's
// spans join the caller's trace.
//
// # Gateway mode
//
// A platform's gateway, which authenticated its users itself, grabs for
// many of them with a gateway key (serve --gateway-key-file) through
// Client.Gateway: concurrent Gateway.Grab calls of a campaign are sent
// together as batch requests (POST /v1/campaigns/{id}/grabs), one in
// flight per campaign by default, the next taking every call queued
// meanwhile, up to 1000 users, with no timer. Each caller hears its own
// user's answer. See Gateway.Grab for errors and cancellation, and
// docs/gateway.md.
//
// # Protocols
//
// Options.Protocol chooses what the grabs (Client.Grab, a Gateway's
// batches) and the payment system's calls (Reserve, Confirm, Cancel)
// speak: JSON (the default), Connect or GRPC, through the generated
// hongbaov1connect clients. The answers are the same Go values and the
// errors the same *Error (its code from the procedure's hongbaov1.Error
// detail, its Status the one the JSON route answers for that code, its
// RetryAfter the whole seconds the route's Retry-After would say), under
// the same retries: a caller cannot tell the protocols apart. Every
// other call speaks JSON. Without Options.HTTPClient the procedures go
// over HTTP/2: TLS on https:// URLs, h2c (prior knowledge) on http://
// ones, as serve speaks both.
//
// # Gateway streams
//
// With GatewayOptions.Stream (under Connect or GRPC) a Gateway keeps one
// GrabStream per campaign instead of sending batch requests: each Grab
// goes out as it arrives under a ref of its own, grabs that arrive
// together in one message, at most MaxBatch (1000, the service's bound)
// in flight; the result that echoes the ref answers its caller. When the
// stream breaks, the grabs it left unanswered are sent again on a new
// one, within Options.Retry (a grab granted before answers
// already_granted with the same packet), and so are the grabs whose
// result says busy, outcome_unknown or unavailable. A caller whose
// context ends hears its error as in batch mode, and the stream goes on.
// The stream closes StreamIdle after its last caller, or at
// Gateway.Close.
//
// # Retries
//
// A call is retried only when retrying cannot do anything twice:
//
//   - when the service did nothing: 429 rate_limited, 503 busy, or a
//     connection that could not be made. Every call is retried then.
//   - when the outcome is unknown: 503 outcome_unknown or unavailable, 500,
//     a gateway's 502/503/504, a connection cut before the reply was read.
//     Only the calls the service makes idempotent are retried then: grab
//     and a Gateway's batch of grabs (one packet per user and campaign: a
//     retry answers the same packet, as already_granted), the held packet, reserve (by user and order
//     id), confirm and cancel (the same answer when repeated), close,
//     pause, resume, block and unblock, every read, and the creates, which always carry an Idempotency-Key
//     (one is drawn when the spec names none). Redrive is not: its
//     unknown outcome is returned as ErrOutcomeUnknown.
//
// A retry waits what Retry-After asks, else a backoff that doubles from
// Retry.MinBackoff up to Retry.MaxBackoff with jitter, at most
// Retry.MaxAttempts attempts in all, and never past the context's
// deadline: a wait that would end after it returns the last error at once.
//
// # Errors
//
// An answer of the service's error shape is an *Error (status, code,
// message, Retry-After). errors.Is matches it against the sentinel of its
// code (ErrNotFound, ErrBusy, ...). A reply lost in transport on a call
// that is not retried, or still lost after the last attempt, matches
// ErrOutcomeUnknown too: the call may or may not have taken effect.
package client
