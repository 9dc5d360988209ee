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
	"github.com/hongbao/hongbao/client/token"
)

// MinSecretLen is the shortest token secret or admin key accepted, in
// bytes (token.MinSecretLen).
const MinSecretLen = token.MinSecretLen

// Secret is one HS256 secret users' tokens may be signed with
// (token.Secret: signers share it without importing the handlers).
type Secret = token.Secret

var (
	errNoCredentials   = errors.New("missing bearer credentials")
	errLongCredentials = fmt.Errorf("bearer credentials longer than %d bytes", maxCredentialLen)
)

// bearer returns the credentials of an "Authorization: Bearer x" header.
// Credentials longer than maxCredentialLen are refused before anything
// hashes or decodes them.
func bearer(header http.Header) (string, error) {
	h := header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return "", errNoCredentials
	}
	if len(cred) > maxCredentialLen {
		return "", errLongCredentials
	}
	return cred, nil
}

// TokenScope is what a deployment's user tokens must say besides their
// signature (token.Scope).
type TokenScope = token.Scope

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

// user returns the user id of the token the request's header carries. The
// error is for logs only; the client learns nothing but 401.
func (a *userAuth) user(header http.Header) (string, error) {
	raw, err := bearer(header)
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

// MintToken signs a user token as token.Mint does. It is for tests, demos
// and load generators; in production the platform signs its users'
// tokens.
func MintToken(secret Secret, user string, ttl time.Duration, now time.Time) (string, error) {
	return token.Mint(secret, user, ttl, now)
}

// MintScopedToken signs a user token with the scope's iss and aud, as
// token.MintScoped does.
func MintScopedToken(secret Secret, scope TokenScope, user string, ttl time.Duration, now time.Time) (string, error) {
	return token.MintScoped(secret, scope, user, ttl, now)
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
func (a *keyAuth) match(header http.Header) (string, error) {
	raw, err := bearer(header)
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
