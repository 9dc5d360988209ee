package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hongbao/hongbao"
)

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

var errNoCredentials = errors.New("missing bearer credentials")

// bearer returns the credentials of an "Authorization: Bearer x" header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		return "", errNoCredentials
	}
	return strings.TrimSpace(cred), nil
}

// TokenScope is what a deployment's user tokens must say besides their
// signature: who issued them, for whom, and how long they may live.
type TokenScope struct {
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

// userAuth verifies users' JWTs.
type userAuth struct {
	byKID  map[string][]byte
	noKID  []byte // for tokens without a kid: the first secret
	leeway time.Duration
	maxAge time.Duration
	now    func() time.Time
	parser *jwt.Parser
	cache  *tokenCache
}

func newUserAuth(secrets []Secret, scope TokenScope, leeway time.Duration, now func() time.Time) *userAuth {
	a := &userAuth{byKID: map[string][]byte{}, leeway: leeway, maxAge: scope.MaxAge, now: now, cache: newTokenCache()}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), // an iat in the future (beyond the leeway) is refused
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	}
	if scope.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(scope.Issuer))
	}
	if scope.Audience != "" {
		opts = append(opts, jwt.WithAudience(scope.Audience)) // aud required
	}
	a.parser = jwt.NewParser(opts...)
	for i, s := range secrets {
		if i == 0 {
			a.noKID = s.Key
		}
		if s.KID != "" {
			a.byKID[s.KID] = s.Key
		}
	}
	return a
}

// checkLifetime refuses a token that lives longer than the maximum age.
func (a *userAuth) checkLifetime(c *jwt.RegisteredClaims, now time.Time) error {
	from := now
	if c.IssuedAt != nil {
		from = c.IssuedAt.Time
	}
	if life := c.ExpiresAt.Sub(from); life > a.maxAge+a.leeway {
		return fmt.Errorf("token lifetime %v is longer than the maximum %v", life, a.maxAge)
	}
	return nil
}

// user returns the user id of the request's token. The error is for logs
// only; the client learns nothing but 401.
func (a *userAuth) user(r *http.Request) (string, error) {
	raw, err := bearer(r)
	if err != nil {
		return "", err
	}
	// A token verified before is taken from the cache, keyed by its exact
	// text: any change to it misses. Only its time limits are checked
	// again.
	now := a.now()
	if user, ok := a.cache.get(raw, now, a.leeway); ok {
		return user, nil
	}
	var claims jwt.RegisteredClaims
	_, err = a.parser.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			if _, has := t.Header["kid"]; has {
				return nil, errors.New("kid is not a non-empty string")
			}
			return a.noKID, nil
		}
		k, ok := a.byKID[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		return k, nil
	})
	if err != nil {
		return "", err
	}
	// sub becomes a Redis hash field and a ledger account.
	if err := hongbao.ValidateUserID(claims.Subject); err != nil {
		return "", fmt.Errorf("token sub: %w", err)
	}
	if err := a.checkLifetime(&claims, now); err != nil {
		return "", err
	}
	a.cache.put(raw, claims)
	return claims.Subject, nil
}

// MintToken signs a user token with HS256: sub is user, iat is now, exp
// is now + ttl, and the header carries kid when it is not empty. It is for
// tests, demos and load generators; in production the platform signs its
// users' tokens.
func MintToken(secret Secret, user string, ttl time.Duration, now time.Time) (string, error) {
	return MintScopedToken(secret, TokenScope{}, user, ttl, now)
}

// MintScopedToken is MintToken with the scope's iss and aud, when set, so
// a server checking them accepts the token. scope.MaxAge is not used.
func MintScopedToken(secret Secret, scope TokenScope, user string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret.Key) < MinSecretLen {
		return "", fmt.Errorf("httpapi: token secret is %d bytes; at least %d needed", len(secret.Key), MinSecretLen)
	}
	if err := hongbao.ValidateUserID(user); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", errors.New("httpapi: token ttl must be positive")
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

// keyAuth checks bearer keys of one class: the operators' admin keys, or
// the payment system's keys (with the admin keys, which may do anything).
type keyAuth struct {
	sums [][sha256.Size]byte
	ids  []string // a fingerprint of each key, for the logs
}

// newKeyAuth accepts keys, each named in the logs as kind:fingerprint.
// The fingerprint is an HMAC of the key under salt, a secret of the
// deployment: a log line names the key without letting whoever reads the
// logs test a guess of it offline.
func newKeyAuth(salt []byte, kind string, keys [][]byte) *keyAuth {
	a := &keyAuth{}
	a.add(salt, kind, keys)
	return a
}

func (a *keyAuth) add(salt []byte, kind string, keys [][]byte) {
	for _, k := range keys {
		a.sums = append(a.sums, sha256.Sum256(k))
		a.ids = append(a.ids, kind+":"+keyFingerprint(salt, k))
	}
}

// keyFingerprint is the first 6 bytes of HMAC-SHA256(salt, key), in hex.
func keyFingerprint(salt, key []byte) string {
	m := hmac.New(sha256.New, salt)
	m.Write(key)
	return hex.EncodeToString(m.Sum(nil)[:6])
}

// fingerprintSalt derives the salt of the key fingerprints from the
// first user token secret: every process of a deployment shares it (the
// fingerprints agree across processes) and it never appears in a log.
func fingerprintSalt(secrets []Secret) []byte {
	m := hmac.New(sha256.New, secrets[0].Key)
	m.Write([]byte("hongbao key fingerprint salt"))
	return m.Sum(nil)
}

// match returns the fingerprint of the key the request presents.
// Hashing first gives every comparison the same length, and every key is
// compared, so the time taken tells nothing about the keys.
func (a *keyAuth) match(r *http.Request) (string, error) {
	raw, err := bearer(r)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256([]byte(raw))
	found := -1
	for i := range a.sums {
		if subtle.ConstantTimeCompare(s[:], a.sums[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", errors.New("not a known key")
	}
	return a.ids[found], nil
}
