package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
)

// tripFailLimit sends bad tokens to a grab until the failed-
// authentication limit answers 429, with the headers hdr, and fails the
// test if it never does within 100 attempts.
func (ts *testServer) tripFailLimit(t *testing.T, id string, hdr ...string) {
	t.Helper()
	for i := range 100 {
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", fmt.Sprintf("junk-%d", i), "", hdr...)
		if r.Status == http.StatusTooManyRequests {
			require.Equal(t, "rate_limited", r.errorCode(t))
			return
		}
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	}
	t.Fatal("the failed-authentication limit never answered 429")
}

// TestValidCredentialsPassTheFailLimit: behind a gateway every request
// comes from one address. Bad tokens from it trip the failed-
// authentication limit, and the next bad ones are answered 429; a valid
// user token, the payment key and the admin key from the same address
// are served all the same.
func TestValidCredentialsPassTheFailLimit(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.AuthFailRate, c.AuthFailBurst = 0.001, 5 })
	id := ts.create(t, `{"total":"1.00","count":1}`)
	did := ts.createDiscount(t, `{"budget":"10.00","quota":10,"min":"0.01","max":"1.00"}`)

	ts.tripFailLimit(t, id)
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "alice"), "")
	require.Equal(t, http.StatusOK, r.Status, "a valid user token: %s", r.Body)
	require.Equal(t, "granted", r.json(t)["outcome"])
	r = ts.do(t, "POST", "/v1/discounts/"+did+"/reserve", string(paymentKey), `{"user_id":"alice","order_id":"o-1","order_amount":"5.00"}`)
	require.Equal(t, http.StatusOK, r.Status, "the payment key: %s", r.Body)
	require.Equal(t, "reserved", r.json(t)["outcome"])
	r = ts.do(t, "GET", "/v1/campaigns/"+id, string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "the admin key: %s", r.Body)
	r = ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "the admin key on /metrics: %s", r.Body)

	// A credential too long to read fails like any other.
	r = ts.do(t, "GET", "/v1/campaigns/"+id, strings.Repeat("k", 5000), "")
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)

	// The address is still over its allowance: a bad credential of any
	// class is answered 429, not 401 or 403.
	for _, c := range []struct{ method, path, key, body string }{
		{"POST", "/v1/campaigns/" + id + "/grab", "junk", ""},
		{"GET", "/v1/campaigns/" + id, "junk", ""},
		{"POST", "/v1/discounts/" + did + "/reserve", token(t, "alice"), `{"user_id":"alice","order_id":"o-2","order_amount":"5.00"}`},
		{"GET", "/metrics", "junk", ""},
	} {
		r := ts.do(t, c.method, c.path, c.key, c.body)
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s %s: %s", c.method, c.path, r.Body)
		require.NotEmpty(t, r.Header.Get("Retry-After"))
	}
}

// TestTrustedProxyForwardsTheClient: behind a trusted proxy the client is
// the right-most address of X-Forwarded-For that is not a trusted proxy.
// Junk from client A trips A's failed-authentication limit only: client
// B through the same proxy is answered 401, and A's valid token is
// served; an address A writes itself to the left of what the proxy
// appended does not get it out. The per-address request limit counts the
// forwarded client too.
func TestTrustedProxyForwardsTheClient(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.AuthFailRate, c.AuthFailBurst = 0.001, 5
		c.TrustedProxies = trusted
	})
	id := ts.create(t, `{"total":"1.00","count":1}`)
	const a, b = "198.51.100.1", "198.51.100.2"
	xff := func(v string) []string { return []string{"X-Forwarded-For", v} }
	grab := "/v1/campaigns/" + id + "/grab"

	ts.tripFailLimit(t, id, xff(a)...)
	r := ts.do(t, "POST", grab, "junk", "", xff(b)...)
	require.Equal(t, http.StatusUnauthorized, r.Status, "client B is not limited: %s", r.Body)
	for _, v := range []string{a, b + ", " + a, a + ", 10.1.2.3", "[::ffff:" + a + "]:4431"} {
		r = ts.do(t, "POST", grab, "junk", "", xff(v)...)
		require.Equal(t, http.StatusTooManyRequests, r.Status, "X-Forwarded-For %q is client A: %s", v, r.Body)
	}
	r = ts.do(t, "POST", grab, token(t, "alice"), "", xff(a)...)
	require.Equal(t, http.StatusOK, r.Status, "A's valid token: %s", r.Body)

	// --ip-rate counts the forwarded client.
	ips := newTestServer(t, func(c *httpapi.Config) {
		c.IPRate, c.IPBurst = 0.001, 2
		c.TrustedProxies = trusted
	})
	get := "/v1/campaigns/" + ips.create(t, `{"total":"1.00","count":1}`)
	for range 2 {
		require.Equal(t, http.StatusOK, ips.do(t, "GET", get, string(adminKey), "", xff(a)...).Status)
	}
	r = ips.do(t, "GET", get, string(adminKey), "", xff(a)...)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
	require.Equal(t, http.StatusOK, ips.do(t, "GET", get, string(adminKey), "", xff(b)...).Status, "client B")
}

// TestUntrustedPeerForwardedForIgnored: a peer that is not a trusted
// proxy is the client whatever X-Forwarded-For it sends: junk naming
// client A trips the peer's limit, and naming B next does not escape it.
func TestUntrustedPeerForwardedForIgnored(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.AuthFailRate, c.AuthFailBurst = 0.001, 5
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} // not the test's peer
	})
	id := ts.create(t, `{"total":"1.00","count":1}`)
	ts.tripFailLimit(t, id, "X-Forwarded-For", "198.51.100.1")
	for _, hdr := range [][]string{{"X-Forwarded-For", "198.51.100.2"}, {"X-Forwarded-For", "10.0.0.1"}, nil} {
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", "junk", "", hdr...)
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%v: %s", hdr, r.Body)
	}
}
