package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Which client a request comes from. The per-address limits (failed
// authentications, IPRate, demo tokens) and the logs count the TCP peer,
// unless the peer is one of Config.TrustedProxies: then the client is
// what X-Forwarded-For says. That header is written by whoever sends the
// request, and each proxy appends the address of its own peer on the
// right; so only the entries the trusted proxies appended can be
// believed: reading from the right, the client is the first address that
// is not itself a trusted proxy. Whatever a client wrote to the left of
// that is ignored, and a peer that is not trusted is never asked.

// trustedPeer says whether a is in one of the trusted proxies' networks.
func (s *Server) trustedPeer(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerHost is the TCP peer's address (host:port), without its port.
func peerHost(peer string) string {
	host, _, err := net.SplitHostPort(peer)
	if err != nil {
		return peer
	}
	return host
}

// clientIP is the address of the request's client: the TCP peer's, or
// the forwarded client's when the peer is a trusted proxy.
func (s *Server) clientIP(r *http.Request) string { return s.clientAddr(r.Header, r.RemoteAddr) }

// clientAddr is clientIP of a request of any protocol: its header and its
// TCP peer (host:port).
func (s *Server) clientAddr(header http.Header, peer string) string {
	if a, ok := s.forwardedClient(header, peer); ok {
		return a.String()
	}
	return peerHost(peer)
}

// remote names the request's client in logs: the TCP peer's address and
// port, or the forwarded client's address.
func (s *Server) remote(r *http.Request) string { return s.remoteOf(r.Header, r.RemoteAddr) }

// remoteOf is remote of a request of any protocol.
func (s *Server) remoteOf(header http.Header, peer string) string {
	if a, ok := s.forwardedClient(header, peer); ok {
		return a.String()
	}
	return peer
}

// forwardedClient is the client address X-Forwarded-For gives when the
// peer is a trusted proxy and the header names one; ok is false when the
// client is the peer itself.
func (s *Server) forwardedClient(header http.Header, peerAddr string) (client netip.Addr, ok bool) {
	if len(s.cfg.TrustedProxies) == 0 {
		return netip.Addr{}, false
	}
	peer, err := netip.ParseAddr(peerHost(peerAddr))
	if err != nil || !s.trustedPeer(peer) {
		return netip.Addr{}, false
	}
	// The header may come as several lines: the last is the right-most.
	vals := header.Values("X-Forwarded-For")
	for i := len(vals) - 1; i >= 0; i-- {
		v := vals[i]
		for v != "" {
			entry := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, good := parseForwarded(entry)
			if !good {
				// A trusted proxy wrote something that is no address:
				// the client is the last proxy read (the peer if none),
				// never a guess.
				return client, ok
			}
			if !s.trustedPeer(a) {
				return a, true
			}
			// A trusted proxy's own peer: go on left. When every entry
			// is trusted, the client is the left-most.
			client, ok = a, true
		}
	}
	return client, ok
}

// parseForwarded reads one entry of X-Forwarded-For: an address, with or
// without a port, an IPv6 one with or without brackets. An IPv4 address
// mapped into IPv6 is read as the IPv4 address.
func parseForwarded(entry string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(entry); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if inner, ok := strings.CutPrefix(entry, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil {
				return a.Unmap().WithZone(""), true
			}
		}
	}
	return netip.Addr{}, false
}
