package httpapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientIP: the client of a request is its peer, unless the peer is
// a trusted proxy; then it is the right-most X-Forwarded-For entry that
// is not a trusted proxy, over every line of the header, with or without
// a port or brackets; a header of trusted proxies only gives the
// left-most; an entry that is no address stops the reading at the last
// proxy read.
func TestClientIP(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"),
	}}}
	for _, c := range []struct {
		name, peer string
		xff        []string
		client     string
	}{
		{"untrusted peer", "192.0.2.9:1", []string{"198.51.100.1"}, "192.0.2.9"},
		{"trusted peer, no header", "10.0.0.2:1", nil, "10.0.0.2"},
		{"trusted peer", "10.0.0.2:1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"the client's own entries", "10.0.0.2:1", []string{"203.0.113.5, 198.51.100.1"}, "198.51.100.1"},
		{"inner proxies skipped", "10.0.0.2:1", []string{"203.0.113.5, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"several lines", "10.0.0.2:1", []string{"203.0.113.5", "198.51.100.1, 10.9.9.9", "10.1.1.1"}, "198.51.100.1"},
		{"empty entries", "10.0.0.2:1", []string{" , 198.51.100.1 ,, "}, "198.51.100.1"},
		{"proxies only", "10.0.0.2:1", []string{"10.7.7.7, 10.8.8.8"}, "10.7.7.7"},
		{"not an address", "10.0.0.2:1", []string{"198.51.100.1, unknown"}, "10.0.0.2"},
		{"not an address behind a proxy", "10.0.0.2:1", []string{"unknown, 10.8.8.8"}, "10.8.8.8"},
		{"with a port", "10.0.0.2:1", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"IPv6", "[fd00::1]:1", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv6 in brackets with a port", "[fd00::1]:1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"IPv4 in IPv6", "[::ffff:10.0.0.2]:1", []string{"::ffff:198.51.100.1"}, "198.51.100.1"},
		{"mapped proxy skipped", "10.0.0.2:1", []string{"198.51.100.1, ::ffff:10.3.3.3"}, "198.51.100.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			require.Equal(t, c.client, s.clientIP(r))
		})
	}

	// Without trusted proxies the header is never read.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:1"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	require.Equal(t, "10.0.0.2", (&Server{}).clientIP(r))
	require.Equal(t, "10.0.0.2:1", (&Server{}).remote(r))

	// A forwarded IPv6 client is limited by its /64.
	r.Header.Set("X-Forwarded-For", "2001:db8:1:2::7")
	require.Equal(t, "2001:db8:1:2::/64", s.addrKey(r))
	require.Equal(t, "2001:db8:1:2::7", s.remote(r))
}
