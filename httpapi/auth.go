package httpapi

import (
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

// userAuth verifies users' JWTs.
type userAuth struct {
	byKID  map[string][]byte
	noKID  []byte // for tokens without a kid: the first secret
	leeway time.Duration
	now    func() time.Time
	parser *jwt.Parser
	cache  *tokenCache
}

func newUserAuth(secrets []Secret, leeway time.Duration, now func() time.Time) *userAuth {
	a := &userAuth{byKID: map[string][]byte{}, leeway: leeway, now: now, cache: newTokenCache()}
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	)
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
	a.cache.put(raw, claims)
	return claims.Subject, nil
}

// MintToken signs a user token with HS256: sub is user, exp is now + ttl,
// and the header carries kid when it is not empty. It is for tests, demos
// and load generators; in production the platform signs its users' tokens.
func MintToken(secret Secret, user string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret.Key) < MinSecretLen {
		return "", fmt.Errorf("httpapi: token secret is %d bytes; at least %d needed", len(secret.Key), MinSecretLen)
	}
	if err := hongbao.ValidateUserID(user); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", errors.New("httpapi: token ttl must be positive")
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	if secret.KID != "" {
		t.Header["kid"] = secret.KID
	}
	return t.SignedString(secret.Key)
}

// adminAuth checks admin bearer keys.
type adminAuth struct {
	sums [][sha256.Size]byte
	ids  []string // a short fingerprint of each key, for the logs
}

func newAdminAuth(keys [][]byte) *adminAuth {
	a := &adminAuth{}
	for _, k := range keys {
		s := sha256.Sum256(k)
		a.sums = append(a.sums, s)
		a.ids = append(a.ids, "key:"+hex.EncodeToString(s[:4]))
	}
	return a
}

// admin returns the fingerprint of the admin key the request presents.
// Hashing first gives every comparison the same length, and every key is
// compared, so the time taken tells nothing about the keys.
func (a *adminAuth) admin(r *http.Request) (string, error) {
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
		return "", errors.New("not an admin key")
	}
	return a.ids[found], nil
}
