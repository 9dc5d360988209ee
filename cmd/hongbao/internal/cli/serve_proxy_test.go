package cli

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestServeTrustedProxyFlag: --trusted-proxy takes CIDRs and single
// addresses, repeated, from HONGBAO_TRUSTED_PROXY (comma-separated) or
// a list in the config file; anything else is a usage error.
func TestServeTrustedProxyFlag(t *testing.T) {
	t.Parallel()
	parse := func(env map[string]string, args ...string) ([]netip.Prefix, error) {
		s := &serveCmd{base: base{env: testIO(env)}}
		err := s.parseFlags(args)
		return s.f.proxies, err
	}
	got, err := parse(nil, "--trusted-proxy", "10.1.2.3/8", "--trusted-proxy", "192.0.2.1", "--trusted-proxy", "2001:db8::1")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("2001:db8::1/128")}, got)
	got, err = parse(map[string]string{"HONGBAO_TRUSTED_PROXY": "10.0.0.0/8, 172.16.0.0/12"})
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12")}, got)
	cfg := writeConfig(t, "serve:\n  trusted-proxy: [10.0.0.0/8, \"fd00::/8\"]\n")
	got, err = parse(nil, "--config", cfg)
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}, got)
	got, err = parse(nil)
	require.NoError(t, err)
	require.Empty(t, got, "none by default")
	_, err = parse(nil, "--trusted-proxy", "gateway")
	require.ErrorContains(t, err, "--trusted-proxy")
}

// TestServeTrustedProxy: a serve trusting its peer (the test, on
// loopback) counts failed authentications per client of X-Forwarded-For
// and logs that client: client A's junk trips A's limit, not B's.
func TestServeTrustedProxy(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--trusted-proxy", "127.0.0.0/8", "--trusted-proxy", "::1", "--auth-fail-rate", "0.001", "--auth-fail-burst", "2")...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"1.00","count":1}`)
	grab := func(client, auth string) int {
		t.Helper()
		req, err := http.NewRequest("POST", p.URL+"/v1/campaigns/"+id+"/grab", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("X-Forwarded-For", client)
		res, err := api.c.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	const a, b = "198.51.100.1", "198.51.100.2"
	require.Equal(t, http.StatusUnauthorized, grab(a, "junk"))
	require.Equal(t, http.StatusUnauthorized, grab(a, "junk"))
	require.Equal(t, http.StatusTooManyRequests, grab(a, "junk"))
	require.Equal(t, http.StatusUnauthorized, grab(b, "junk"), "client B is not limited")
	require.Equal(t, http.StatusOK, grab(a, api.userToken(t, "alice")), "A's valid token is served")
	require.Contains(t, p.stderr.String(), "last_remote="+a)
}
