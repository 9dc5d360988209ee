package token_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/token"
)

var key = []byte(strings.Repeat("k", token.MinSecretLen))

func TestMintScoped(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	raw, err := token.MintScoped(token.Secret{KID: "k1", Key: key},
		token.Scope{Issuer: "platform", Audience: "hongbao"}, "user-42", time.Hour, now)
	require.NoError(t, err)

	var claims jwt.RegisteredClaims
	parsed, err := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("platform"), jwt.WithAudience("hongbao")).
		ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil })
	require.NoError(t, err)
	require.Equal(t, "k1", parsed.Header["kid"])
	require.Equal(t, "user-42", claims.Subject)
	require.Equal(t, now.Unix(), claims.IssuedAt.Unix())
	require.Equal(t, now.Add(time.Hour).Unix(), claims.ExpiresAt.Unix())

	// Another key does not verify it.
	_, err = jwt.Parse(raw, func(*jwt.Token) (any, error) { return []byte(strings.Repeat("x", 32)), nil },
		jwt.WithTimeFunc(func() time.Time { return now }))
	require.ErrorIs(t, err, jwt.ErrTokenSignatureInvalid)
}

func TestMintWithoutKIDOrScope(t *testing.T) {
	t.Parallel()
	raw, err := token.Mint(token.Secret{Key: key}, "u1", time.Minute, time.Now())
	require.NoError(t, err)
	var claims jwt.RegisteredClaims
	parsed, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil })
	require.NoError(t, err)
	require.NotContains(t, parsed.Header, "kid")
	require.Empty(t, claims.Issuer)
	require.Empty(t, claims.Audience)
}

func TestMintRefuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, err := token.Mint(token.Secret{Key: key[:token.MinSecretLen-1]}, "u1", time.Minute, now)
	require.ErrorContains(t, err, "at least 32")
	_, err = token.Mint(token.Secret{Key: key}, "a b", time.Minute, now)
	require.ErrorIs(t, err, hongbao.ErrInvalidID)
	_, err = token.Mint(token.Secret{Key: key}, "u1", 0, now)
	require.ErrorContains(t, err, "ttl must be positive")
}
