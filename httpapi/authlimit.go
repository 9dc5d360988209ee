package httpapi

import (
	"sync"
	"time"
)

// Budgets only for the authenticated. A request whose credentials fail
// spends nothing that a user's request needs: not the global request
// budget (taken after authentication), not a user's. What it does spend is
// its client address's allowance of failed authentications, and an
// address out of it is answered 429 instead of 401 or 403 for each further
// failure. The limit refuses failures only: credentials are checked
// first, and valid ones are served whatever their address spent. Behind a
// gateway every client shares the gateway's address (unless
// Config.TrustedProxies names it), and a limit that answered the address
// before reading its credentials would let anyone sending junk from
// behind the same gateway shut out the operators, the payment system and
// every user.
//
// What the limit does not do is slow a guesser down: a right guess is
// served like any valid credential, at whatever rate the guesser sends.
// The credentials themselves make guessing hopeless: keys and token
// secrets are at least MinSecretLen (32) random bytes, compared through
// their SHA-256 in constant time against every key (keyAuth.match), and a
// token needs an HMAC-SHA256 under such a secret. A guesser past the
// allowance learns nothing from its failures but 429. The limit is there
// so a flood of bad credentials is told to back off and is logged and
// counted cheaply, and so a client with a bad or expired token stops
// retrying at speed.
//
// What a flood costs: every bad credential is now checked before it is
// refused, where an address past its allowance used to cost a map lookup.
// A credential is at most maxCredentialLen bytes (longer ones are refused
// unread). Measured on one core of our machine kind (2 cores): a malformed token
// (no three parts) about 1 µs, a well-formed token with a wrong signature
// about 15 µs (decoding and one HMAC-SHA256), one of the full 4 KiB about
// 55 µs, a key of 4 KiB about 6 µs (one SHA-256, then a constant-time
// comparison with every configured key). An HTTP request costs serve tens
// of microseconds before any handler runs (BENCHMARKS.md: 12,000 to 21,000
// grabs a second on two vCPUs, Redis included), so a flood of bad
// credentials costs at most a few times what the same flood of requests
// already costs: no new way to exhaust the CPU. An operator who fears one
// limits requests per client before serve (the gateway) or with --ip-rate,
// which is taken before credentials are read. The failures are logged
// sampled: one line a second at most, with the count, not one line per
// attempt.

// maxCredentialLen is the longest bearer credential read. A user token
// carries a few claims (a few hundred bytes); keys are checked to be at
// most this long (Config.Validate).
const maxCredentialLen = 4 << 10

// failLogEvery is the most often failed authentications are logged.
const failLogEvery = time.Second

// logSampler counts events and lets one log line through per period, with
// the count since the last line.
type logSampler struct {
	mu   sync.Mutex
	last time.Time
	n    int64
}

func (l *logSampler) sample(now time.Time) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if now.Sub(l.last) < failLogEvery {
		return 0, false
	}
	n := l.n
	l.last, l.n = now, 0
	return n, true
}
