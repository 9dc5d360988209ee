package httpapi

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// TestTokenCacheTimesMatchParser: a cached token is taken exactly while
// the parser would take it: a token expired by a
// fraction of a second past its leeway is refused, not served from the
// cache.
func TestTokenCacheTimesMatchParser(t *testing.T) {
	t.Parallel()
	const leeway = 30 * time.Second
	exp := time.Unix(1_900_000_000, 0)
	nbf := exp.Add(-time.Hour)
	c := newTokenCache()
	c.put("tok", jwt.RegisteredClaims{Subject: "u", ExpiresAt: jwt.NewNumericDate(exp), NotBefore: jwt.NewNumericDate(nbf)})
	for _, tc := range []struct {
		at time.Time
		ok bool
	}{
		{exp, true},
		{exp.Add(leeway - time.Millisecond), true},
		{exp.Add(leeway), false},
		{exp.Add(leeway + 500*time.Millisecond), false},
		{nbf.Add(-leeway), true},
		{nbf.Add(-leeway - 500*time.Millisecond), false},
	} {
		// What the parser decides at that moment, for the same claims.
		claims := jwt.RegisteredClaims{Subject: "u", ExpiresAt: jwt.NewNumericDate(exp), NotBefore: jwt.NewNumericDate(nbf)}
		parserOK := jwt.NewValidator(jwt.WithLeeway(leeway), jwt.WithTimeFunc(func() time.Time { return tc.at }), jwt.WithExpirationRequired()).Validate(claims) == nil
		require.Equal(t, tc.ok, parserOK, "the parser at %v", tc.at)
		_, hit := c.get("tok", tc.at, leeway)
		require.Equal(t, tc.ok, hit, "the cache at %v", tc.at)
	}
	// A token put without exp is never cached.
	c.put("noexp", jwt.RegisteredClaims{Subject: "u"})
	_, hit := c.get("noexp", exp, leeway)
	require.False(t, hit)
}
