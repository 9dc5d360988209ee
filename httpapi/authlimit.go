package httpapi

import (
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Budgets only for the authenticated. A request whose credentials fail
// spends nothing that a user's request needs: not the global request
// budget (taken after authentication), not a user's. What it does spend is
// its address's allowance of failed authentications: an address out of it
// is answered 429 before its credentials are even read, so a flood of bad
// tokens costs a map lookup per request and cannot guess keys at speed.
// The failures are logged sampled: one line a second at most, with the
// count, not one line per attempt.

// addrKey is the key of a client address for the failure limit: an IPv4
// address, or an IPv6 address's /64 (one host commonly holds a whole /64,
// so per-address keys would give it 2^64 allowances).
func addrKey(r *http.Request) string {
	ip := clientIP(r)
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// failGate answers 429 to an address that spent its allowance of failed
// authentications, and says whether the request may go on.
func (s *Server) failGate(w http.ResponseWriter, r *http.Request) bool {
	blocked, wait := s.failLim.blocked(addrKey(r), s.cfg.Now())
	if !blocked {
		return true
	}
	s.metrics.limited.WithLabelValues("auth_failures").Inc()
	s.refuse(w, errAuthFailLimit, wait)
	return false
}

// authFailed refuses a request whose credentials for class failed (err):
// it spends one of the address's failed authentications, logs the failure,
// sampled, and answers refusal. It returns what an authenticator returns
// for a refused request.
func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, class string, err error, refusal *requestError) (string, bool) {
	now := s.cfg.Now()
	s.failLim.allow(addrKey(r), now)
	s.metrics.authFailures.WithLabelValues(class).Inc()
	if n, ok := s.failLog.sample(now); ok {
		s.log.Warn("authentications failed", "count", n, "last_class", class, "last_route", r.Pattern,
			"last_remote", r.RemoteAddr, "last_err", err, "every", failLogEvery)
	}
	s.refuse(w, refusal, 0)
	return "", false
}

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

// spend takes one request from the global budget, after the request
// authenticated; on refusal it has answered.
func (s *Server) spend(w http.ResponseWriter, r *http.Request) bool {
	ok, wait, err := s.global.allow(r.Context(), s.cfg.Now())
	if err != nil {
		s.log.Warn("global rate limit unavailable; allowing", "err", err)
	}
	if !ok {
		s.metrics.limited.WithLabelValues("global").Inc()
		s.countRefusal(r)
		s.refuse(w, errGlobalLimit, wait)
	}
	return ok
}

// anyone is the global budget for the routes that take no credentials
// (the demo mode's).
func (s *Server) anyone(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.spend(w, r) {
			next(w, r)
		}
	}
}
