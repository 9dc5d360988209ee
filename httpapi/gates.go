package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"time"
)

// The gates in front of the operations: the per-address limit, the
// authentication of each class of caller, the per-user limit, the global
// budget. They read what any protocol carries (an inbound) and return the
// caller, or a refusal; the protocol encodes the refusal (HTTP: the error
// shape with its status and Retry-After, refuse). The JSON routes apply
// them through v1, user, admin, payment and anyone (server.go); a second
// protocol calls the same gates from its own interceptors.

// inbound is what the gates read of a request, whatever its protocol.
type inbound struct {
	ctx context.Context
	// route names the operation, for logs and metrics: the JSON route's
	// pattern ("POST /v1/campaigns/{id}/grab").
	route string
	// campaign is the campaign the request names, "" when it names none
	// or the route is not the grab's (only a refused grab is counted in
	// the console's live counts).
	campaign string
	// header carries the credentials (Authorization: Bearer) and, from a
	// trusted proxy, X-Forwarded-For; gRPC metadata maps onto it.
	header http.Header
	// peer is the TCP peer's address, host:port.
	peer string
}

// inboundOf is what the gates read of an HTTP request.
func inboundOf(r *http.Request) inbound {
	in := inbound{ctx: r.Context(), route: r.Pattern, header: r.Header, peer: r.RemoteAddr}
	if r.Pattern == grabRoute || r.Pattern == grabsRoute {
		in.campaign = r.PathValue("id")
	}
	return in
}

// refusal is a gate's answer to a request it does not let through:
// answer is nil when the gate let it through. wait, when positive, is
// how long a rate limit asks the client to wait.
type refusal struct {
	answer *requestError
	wait   time.Duration
}

// refused says whether the gate refused the request.
func (r refusal) refused() bool { return r.answer != nil }

// ipGate applies the per-address request limit. Failed authentications
// are limited where they fail (authFailed), and the global budget is
// spent after authentication (spendGate).
func (s *Server) ipGate(in inbound) refusal {
	if ok, wait := s.ipLim.allow(s.clientAddr(in.header, in.peer), s.cfg.Now()); !ok {
		s.metrics.limited.WithLabelValues("ip").Inc()
		s.countRefusal(in)
		return refusal{errAddressLimit, wait}
	}
	return refusal{}
}

// userGate authenticates a user and applies the per-user limit.
func (s *Server) userGate(in inbound) (string, refusal) {
	u, err := s.users.user(in.header)
	if err != nil {
		return "", s.authFailed(in, "user", err, errNeedUserToken)
	}
	if ok, wait := s.userLim.allow(u, s.cfg.Now()); !ok {
		s.metrics.limited.WithLabelValues("user").Inc()
		s.countRefusal(in)
		return "", refusal{errUserLimit, wait}
	}
	return u, refusal{}
}

// adminGate authenticates an operator.
func (s *Server) adminGate(in inbound) (string, refusal) {
	who, err := s.admins.match(in.header)
	if err != nil {
		return "", s.authFailed(in, "admin", err, errNeedAdminKey)
	}
	return who, refusal{}
}

// paymentGate authenticates the payment system (a payment key or an
// admin key). A user's own token is refused as forbidden: a user who
// could reserve and confirm discounts would credit themselves for orders
// never paid.
func (s *Server) paymentGate(in inbound) (string, refusal) {
	who, err := s.payments.match(in.header)
	if err == nil {
		return who, refusal{}
	}
	if _, uerr := s.users.user(in.header); uerr == nil {
		return "", s.authFailed(in, "payment", errors.New("a user token"), errUserNotPayment)
	}
	return "", s.authFailed(in, "payment", err, errNeedPaymentKey)
}

// spendGate takes one request from the global budget, after the request
// authenticated.
func (s *Server) spendGate(in inbound) refusal {
	ok, wait, err := s.global.allow(in.ctx, s.cfg.Now())
	if err != nil {
		s.log.Warn("global rate limit unavailable; allowing", "err", err)
	}
	if !ok {
		s.metrics.limited.WithLabelValues("global").Inc()
		s.countRefusal(in)
		return refusal{errGlobalLimit, wait}
	}
	return refusal{}
}

// addrKey is the key of a client address for the failure limit: an IPv4
// address, or an IPv6 address's /64 (one host commonly holds a whole /64,
// so per-address keys would give it 2^64 allowances).
func (s *Server) addrKey(r *http.Request) string { return s.addrKeyOf(r.Header, r.RemoteAddr) }

// addrKeyOf is addrKey of a request of any protocol.
func (s *Server) addrKeyOf(header http.Header, peer string) string {
	ip := s.clientAddr(header, peer)
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

// authFailed refuses a request whose credentials for class failed (err):
// it spends one of the client address's failed authentications and
// refuses with answer, or as rate limited when the address has none
// left; it logs the failure, sampled.
func (s *Server) authFailed(in inbound, class string, err error, answer *requestError) refusal {
	now := s.cfg.Now()
	var wait time.Duration
	if ok, left := s.failLim.allow(s.addrKeyOf(in.header, in.peer), now); !ok {
		s.metrics.limited.WithLabelValues("auth_failures").Inc()
		answer, wait = errAuthFailLimit, left
	}
	s.metrics.authFailures.WithLabelValues(class).Inc()
	if n, ok := s.failLog.sample(now); ok {
		s.log.Warn("authentications failed", "count", n, "last_class", class, "last_route", in.route,
			"last_remote", s.remoteOf(in.header, in.peer), "last_err", err, "every", failLogEvery)
	}
	return refusal{answer, wait}
}
