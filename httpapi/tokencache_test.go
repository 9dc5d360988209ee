package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
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

// plainTestAuth is a userAuth of two secrets (k1 also for tokens without
// a kid) and the key k1 signs with.
func plainTestAuth() (*userAuth, []byte) {
	k1 := []byte("user-secret-one-0123456789abcdefghij")
	k2 := []byte("user-secret-two-0123456789abcdefghij")
	a := newUserAuth([]Secret{{KID: "k1", Key: k1}, {KID: "k2", Key: k2}}, TokenScope{MaxAge: 24 * time.Hour}, 30*time.Second, time.Now)
	return a, k1
}

// signPlain makes a token of header and claims JSON as given, signed
// HS256 with key.
func signPlain(header, claims string, key []byte) string {
	s := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return s + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkPlainAgrees holds verifyPlain to the parser: a token it takes, the
// parser takes too (claims validation aside: both paths then apply the
// same validator), with the same claims.
func checkPlainAgrees(t *testing.T, a *userAuth, raw string) bool {
	t.Helper()
	got, ok := a.verifyPlain(raw)
	if !ok {
		return false
	}
	p := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithoutClaimsValidation())
	var want jwt.RegisteredClaims
	_, err := p.ParseWithClaims(raw, &want, a.key)
	require.NoError(t, err, "verifyPlain took %q, the parser refuses it", raw)
	require.Equal(t, want, got, "claims of %q", raw)
	return true
}

// TestVerifyPlain: the tokens signers make take the plain road; every
// other shape is left to the parser (which may take or refuse it), and a
// bad signature or an unknown kid never passes.
func TestVerifyPlain(t *testing.T) {
	t.Parallel()
	a, k1 := plainTestAuth()
	now := time.Now()
	for _, sec := range []Secret{{KID: "k1", Key: k1}, {Key: k1}, {KID: "k2", Key: []byte("user-secret-two-0123456789abcdefghij")}} {
		tok, err := MintToken(sec, "u-1", time.Hour, now)
		require.NoError(t, err)
		require.True(t, checkPlainAgrees(t, a, tok), "minted with kid %q", sec.KID)
		tok, err = MintScopedToken(sec, TokenScope{Issuer: "shop", Audience: "rain"}, "u-2", time.Hour, now)
		require.NoError(t, err)
		require.True(t, checkPlainAgrees(t, a, tok), "scoped, kid %q", sec.KID)
	}
	hdr := `{"alg":"HS256","kid":"k1","typ":"JWT"}`
	taken := []struct{ header, claims string }{
		{hdr, `{"sub":"u","exp":1900000000}`},
		{`{"alg":"HS256"}`, `{"exp":1900000000,"sub":"u","aud":["a","b"],"role":"x","n":7,"f":false,"z":null}`},
		{hdr, `{"sub":"u","exp":1900000000,"aud":[]}`},
	}
	for _, c := range taken {
		require.True(t, checkPlainAgrees(t, a, signPlain(c.header, c.claims, k1)), "%s %s", c.header, c.claims)
	}
	left := []struct{ name, header, claims string }{
		{"whitespace", hdr, `{"sub":"u", "exp":1900000000}`},
		{"escape", hdr, `{"sub":"\u0075","exp":1900000000}`},
		{"claim name in another case", hdr, `{"sub":"u","Sub":"v","exp":1900000000}`},
		{"repeated claim", hdr, `{"sub":"u","exp":1900000000,"exp":1}`},
		{"fractional time", hdr, `{"sub":"u","exp":1900000000.5}`},
		{"negative time", hdr, `{"sub":"u","exp":-1}`},
		{"leading zero", hdr, `{"sub":"u","exp":01900000000}`},
		{"time as string", hdr, `{"sub":"u","exp":"1900000000"}`},
		{"null claim", hdr, `{"sub":null,"exp":1900000000}`},
		{"object claim", hdr, `{"sub":"u","exp":1900000000,"x":{}}`},
		{"trailing comma", hdr, `{"sub":"u","exp":1900000000,}`},
		{"non-ASCII", hdr, `{"sub":"ü","exp":1900000000}`},
		{"alg none", `{"alg":"none"}`, `{"sub":"u","exp":1900000000}`},
		{"alg HS512", `{"alg":"HS512"}`, `{"sub":"u","exp":1900000000}`},
		{"unknown kid", `{"alg":"HS256","kid":"k9"}`, `{"sub":"u","exp":1900000000}`},
		{"empty kid", `{"alg":"HS256","kid":""}`, `{"sub":"u","exp":1900000000}`},
		{"kid of another key", `{"alg":"HS256","kid":"k2"}`, `{"sub":"u","exp":1900000000}`},
		{"other header", `{"alg":"HS256","jku":"x"}`, `{"sub":"u","exp":1900000000}`},
	}
	for _, c := range left {
		require.False(t, checkPlainAgrees(t, a, signPlain(c.header, c.claims, k1)), c.name)
	}
	good := signPlain(hdr, `{"sub":"u","exp":1900000000}`, k1)
	for _, bad := range []string{good[:len(good)-2] + "AA", good + ".x", strings.Replace(good, ".", "..", 1), "a.b", ""} {
		require.False(t, checkPlainAgrees(t, a, bad), bad)
	}
}

// FuzzVerifyPlain: whatever header and claims are signed, a token that
// verifyPlain takes the parser takes, with the same claims.
func FuzzVerifyPlain(f *testing.F) {
	f.Add(`{"alg":"HS256","kid":"k1","typ":"JWT"}`, `{"exp":1900000000,"iat":1800000000,"sub":"u-1"}`)
	f.Add(`{"alg":"HS256"}`, `{"aud":["a","b"],"exp":1900000000,"iss":"shop","jti":"j","nbf":1,"sub":"u"}`)
	f.Add(`{"alg":"HS256"}`, `{"Exp":1,"sub":"u","x":[],"y":true}`)
	a, k1 := plainTestAuth()
	f.Fuzz(func(t *testing.T, header, claims string) {
		checkPlainAgrees(t, a, signPlain(header, claims, k1))
	})
}
