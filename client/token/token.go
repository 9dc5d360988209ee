// Package token signs the user tokens the HTTP API accepts (HS256 JWTs
// whose sub is the user id): for a platform's back end that signs its
// users' tokens in Go and calls the API with package client, and for
// tests, demos and load generators. It holds what a signer and the API's
// verifier share, the secret and the scope; the service's package httpapi
// verifies tokens and names these types as its own.
//
// It lives in the client module, beside the client, so that a back end
// signs tokens without linking the engine: its only dependency is
// github.com/golang-jwt/jwt/v5.
package token

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hongbao/hongbao/client/internal/userid"
)

// ErrInvalidUser is the error of a mint for a user id the service does
// not accept (1 to 64 of A-Z a-z 0-9 _ - . : @).
var ErrInvalidUser = errors.New("token: invalid user id")

// MinSecretLen is the shortest token secret or admin key accepted, in
// bytes: HS256 with a shorter secret can be brute-forced offline from one
// token.
const MinSecretLen = 32

// Secret is one HS256 secret users' tokens may be signed with. KID names
// it in a token's "kid" header; several secrets let the platform rotate
// without downtime.
type Secret struct {
	// KID is the key id; empty for the secret of tokens without a kid.
	KID string
	// Key is the secret, at least MinSecretLen bytes.
	Key []byte
}

// Scope is what a deployment's user tokens must say besides their
// signature: who issued them, for whom, and how long they may live.
type Scope struct {
	// Issuer, when not empty, must be the token's "iss". Default: not
	// checked.
	Issuer string
	// Audience, when not empty, must be among the token's "aud", which is
	// then required. Default: not checked.
	Audience string
	// MaxAge is the longest lifetime a token may have: exp - iat, or for a
	// token without iat, exp - now. A token signed for longer is refused,
	// so a leaked one is not good for years. Default 24h.
	MaxAge time.Duration
}

// Mint signs a user token with HS256: sub is user, iat is now, exp is
// now + ttl, and the header carries kid when it is not empty.
func Mint(secret Secret, user string, ttl time.Duration, now time.Time) (string, error) {
	return MintScoped(secret, Scope{}, user, ttl, now)
}

// MintScoped is Mint with the scope's iss and aud, when set, so a server
// checking them accepts the token. scope.MaxAge is not used.
func MintScoped(secret Secret, scope Scope, user string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret.Key) < MinSecretLen {
		return "", fmt.Errorf("token: secret is %d bytes; at least %d needed", len(secret.Key), MinSecretLen)
	}
	if err := userid.Check(user); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidUser, err)
	}
	if ttl <= 0 {
		return "", errors.New("token: ttl must be positive")
	}
	claims := jwt.RegisteredClaims{
		Subject:   user,
		Issuer:    scope.Issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	if scope.Audience != "" {
		claims.Audience = jwt.ClaimStrings{scope.Audience}
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	if secret.KID != "" {
		t.Header["kid"] = secret.KID
	}
	return t.SignedString(secret.Key)
}
