package httpapi

import (
	"fmt"
	"net/http"
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

// BenchmarkUserToken verifies a token not seen before (a user's first tap:
// the cache misses) and one seen before (a repeat tap).
//
//	go test -run '^$' -bench UserToken -benchmem ./httpapi/
func BenchmarkUserToken(b *testing.B) {
	sec := Secret{KID: "k1", Key: []byte("user-secret-one-0123456789abcdefghij")}
	a := newUserAuth([]Secret{sec}, TokenScope{MaxAge: 24 * time.Hour}, 30*time.Second, time.Now)
	const n = 4096
	headers := make([]http.Header, n)
	for i := range headers {
		tok, err := MintToken(sec, fmt.Sprintf("u-%d", i), time.Hour, time.Now())
		require.NoError(b, err)
		headers[i] = http.Header{"Authorization": {"Bearer " + tok}}
	}
	b.Run("first", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if i%n == 0 {
				a.cache = newTokenCache()
			}
			if _, err := a.user(headers[i%n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("repeat", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := a.user(headers[i%n]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
