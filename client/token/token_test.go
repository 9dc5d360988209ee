package token_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hongbao/hongbao/client/token"
)

// The client module's tests use the standard library only, so that its
// module graph stays what its code needs.

var key = []byte(strings.Repeat("k", token.MinSecretLen))

func TestMintScoped(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	raw, err := token.MintScoped(token.Secret{KID: "k1", Key: key},
		token.Scope{Issuer: "platform", Audience: "hongbao"}, "user-42", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}

	var claims jwt.RegisteredClaims
	parsed, err := jwt.NewParser(jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("platform"), jwt.WithAudience("hongbao")).
		ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil })
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Header["kid"] != "k1" {
		t.Errorf("kid %v, want k1", parsed.Header["kid"])
	}
	if claims.Subject != "user-42" {
		t.Errorf("sub %q, want user-42", claims.Subject)
	}
	if claims.IssuedAt.Unix() != now.Unix() {
		t.Errorf("iat %v, want %v", claims.IssuedAt.Unix(), now.Unix())
	}
	if claims.ExpiresAt.Unix() != now.Add(time.Hour).Unix() {
		t.Errorf("exp %v, want %v", claims.ExpiresAt.Unix(), now.Add(time.Hour).Unix())
	}

	// Another key does not verify it.
	_, err = jwt.Parse(raw, func(*jwt.Token) (any, error) { return []byte(strings.Repeat("x", 32)), nil },
		jwt.WithTimeFunc(func() time.Time { return now }))
	if !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("another key: %v, want %v", err, jwt.ErrTokenSignatureInvalid)
	}
}

func TestMintWithoutKIDOrScope(t *testing.T) {
	t.Parallel()
	raw, err := token.Mint(token.Secret{Key: key}, "u1", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.RegisteredClaims
	parsed, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parsed.Header["kid"]; ok {
		t.Errorf("a kid header without a KID: %v", parsed.Header["kid"])
	}
	if claims.Issuer != "" || len(claims.Audience) != 0 {
		t.Errorf("iss %q aud %v, want none", claims.Issuer, claims.Audience)
	}
}

func TestMintRefuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	if _, err := token.Mint(token.Secret{Key: key[:token.MinSecretLen-1]}, "u1", time.Minute, now); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short secret: %v", err)
	}
	if _, err := token.Mint(token.Secret{Key: key}, "a b", time.Minute, now); !errors.Is(err, token.ErrInvalidUser) {
		t.Errorf("a bad user id: %v, want %v", err, token.ErrInvalidUser)
	}
	if _, err := token.Mint(token.Secret{Key: key}, "u1", 0, now); err == nil || !strings.Contains(err.Error(), "ttl must be positive") {
		t.Errorf("a zero ttl: %v", err)
	}
}
