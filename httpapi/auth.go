package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
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
	// claims is the parser's own validator of the claims (the same
	// options), for tokens decoded by verifyPlain.
	claims *jwt.Validator
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
	a.claims = jwt.NewValidator(opts...)
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
	// A token of the plain shape signers produce is verified here without
	// the parser's reflection; anything else, and every token refused,
	// goes through the parser, which decides.
	claims, ok := a.verifyPlain(raw)
	if ok && a.claims.Validate(&claims) == nil && hongbao.ValidateUserID(claims.Subject) == nil &&
		a.checkLifetime(&claims, now) == nil {
		a.cache.put(raw, claims)
		return claims.Subject, nil
	}
	claims = jwt.RegisteredClaims{}
	if _, err = a.parser.ParseWithClaims(raw, &claims, a.key); err != nil {
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

// key is the parser's key function: the secret the token's kid names, or
// the first secret for a token without a kid.
func (a *userAuth) key(t *jwt.Token) (any, error) {
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
}

// maxPlainSegment bounds the decoded header and claims verifyPlain reads.
const maxPlainSegment = 512

// verifyPlain checks raw's HS256 signature and decodes its claims when
// the token has the plain shape that signers (token.Mint, jwt libraries)
// produce: compact JSON without whitespace or escapes, a header of alg,
// kid and typ only, registered claims of the types RFC 7519 gives them
// (times as integers), other claims as scalars. It never refuses: ok
// false leaves the decision to the parser, so that what it accepts is a
// subset of what the parser accepts, with the same claims (a fuzz test
// holds it to that). The claims' times and scope are still to be checked
// (the parser's validator).
func (a *userAuth) verifyPlain(raw string) (jwt.RegisteredClaims, bool) {
	var c jwt.RegisteredClaims
	h, rest, ok1 := strings.Cut(raw, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(sig, '.') >= 0 {
		return c, false
	}
	var buf [maxPlainSegment]byte
	hb, ok := decodeSegment(buf[:], h)
	if !ok {
		return c, false
	}
	key, ok := a.plainHeaderKey(hb)
	if !ok {
		return c, false
	}
	var sum [sha256.Size]byte
	if n, ok := decodeSegment(sum[:], sig); !ok || len(n) != sha256.Size {
		return c, false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(raw[:len(h)+1+len(p)]))
	if !hmac.Equal(m.Sum(nil), sum[:]) {
		return c, false
	}
	pb, ok := decodeSegment(buf[:], p)
	if !ok || !plainClaims(pb, &c) {
		return c, false
	}
	return c, true
}

// decodeSegment decodes a segment into dst as the parser does (unpadded
// base64url), or answers false when it does not fit.
func decodeSegment(dst []byte, seg string) ([]byte, bool) {
	if base64.RawURLEncoding.DecodedLen(len(seg)) > len(dst) {
		return nil, false
	}
	n, err := base64.RawURLEncoding.Decode(dst, []byte(seg))
	if err != nil {
		return nil, false
	}
	return dst[:n], true
}

// plainHeaderKey reads a plain header (alg HS256, an optional non-empty
// kid, an optional typ, each once) and returns the secret it names.
func (a *userAuth) plainHeaderKey(b []byte) ([]byte, bool) {
	var alg, kid string
	var hasKID, hasTyp bool
	ok := plainObject(b, func(k string, v []byte) bool {
		s, isStr := plainString(v)
		switch {
		case !isStr:
			return false
		case k == "alg" && alg == "":
			alg = s
		case k == "kid" && !hasKID:
			kid, hasKID = s, true
		case k == "typ" && !hasTyp:
			hasTyp = true
		default:
			return false
		}
		return true
	})
	if !ok || alg != jwt.SigningMethodHS256.Alg() {
		return nil, false
	}
	if !hasKID {
		return a.noKID, a.noKID != nil
	}
	k, found := a.byKID[kid]
	return k, found && kid != ""
}

// plainClaims reads plain claims into c: sub, iss and jti as strings, aud
// as a string or an array of strings, exp, nbf and iat as integers, each
// once; any other claim must be a scalar and a name that no registered
// claim matches without regard to case (the parser's JSON decoding would
// match it).
func plainClaims(b []byte, c *jwt.RegisteredClaims) bool {
	var seen uint8
	return plainObject(b, func(k string, v []byte) bool {
		bit := uint8(0)
		switch strings.ToLower(k) {
		case "sub":
			bit = 1
		case "iss":
			bit = 2
		case "jti":
			bit = 4
		case "aud":
			bit = 8
		case "exp":
			bit = 16
		case "nbf":
			bit = 32
		case "iat":
			bit = 64
		default:
			return plainScalar(v)
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		var ok bool
		switch k {
		case "sub":
			c.Subject, ok = plainString(v)
		case "iss":
			c.Issuer, ok = plainString(v)
		case "jti":
			c.ID, ok = plainString(v)
		case "aud":
			c.Audience, ok = plainStrings(v)
		case "exp":
			c.ExpiresAt, ok = plainDate(v)
		case "nbf":
			c.NotBefore, ok = plainDate(v)
		case "iat":
			c.IssuedAt, ok = plainDate(v)
		}
		return ok // a name in another case ("Sub") is none of the above
	})
}

// plainObject calls f with each member of a flat JSON object without
// whitespace, whose names are plain strings and whose values are plain
// strings, integers, true, false, null or arrays of plain strings. It
// answers false for anything else, or when f does.
func plainObject(b []byte, f func(k string, v []byte) bool) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	b = b[1 : len(b)-1]
	for len(b) > 0 {
		n := plainStringLen(b)
		if n < 0 || n+1 >= len(b) || b[n] != ':' {
			return false
		}
		k := string(b[1 : n-1])
		b = b[n+1:]
		end := plainValueLen(b)
		if end < 0 || !f(k, b[:end]) {
			return false
		}
		b = b[end:]
		if len(b) > 0 {
			if b[0] != ',' || len(b) == 1 {
				return false
			}
			b = b[1:]
		}
	}
	return true
}

// plainStringLen is the length of the plain string b opens with
// (printable ASCII, no escapes), quotes included, or -1.
func plainStringLen(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20 || c > 0x7e || c == '\\':
			return -1
		}
	}
	return -1
}

// plainValueLen is the length of the plain value b opens with, or -1.
func plainValueLen(b []byte) int {
	switch {
	case len(b) == 0:
		return -1
	case b[0] == '"':
		return plainStringLen(b)
	case b[0] == '[':
		i := 1
		for i < len(b) && b[i] != ']' {
			if i > 1 {
				if b[i] != ',' {
					return -1
				}
				i++
			}
			n := plainStringLen(b[i:])
			if n < 0 {
				return -1
			}
			i += n
		}
		if i >= len(b) {
			return -1
		}
		return i + 1
	}
	i := 0
	for i < len(b) && b[i] != ',' {
		i++
	}
	if !plainScalar(b[:i]) {
		return -1
	}
	return i
}

// plainScalar reports whether v is a plain string, a plain integer, true,
// false or null.
func plainScalar(v []byte) bool {
	if _, ok := plainString(v); ok {
		return true
	}
	if _, ok := plainInt(v); ok {
		return true
	}
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	return false
}

// plainString is the plain string v, quotes removed.
func plainString(v []byte) (string, bool) {
	if plainStringLen(v) != len(v) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// plainStrings is a plain string or an array of them, as jwt.ClaimStrings.
func plainStrings(v []byte) (jwt.ClaimStrings, bool) {
	if s, ok := plainString(v); ok {
		return jwt.ClaimStrings{s}, true
	}
	if len(v) < 2 || v[0] != '[' || plainValueLen(v) != len(v) {
		return nil, false
	}
	var out jwt.ClaimStrings // nil for [], as the parser makes it
	for i := 1; i < len(v)-1; {
		n := plainStringLen(v[i:])
		out = append(out, string(v[i+1:i+n-1]))
		i += n + 1
	}
	return out, true
}

// plainInt is a JSON integer of 1 to 12 digits (no sign, no leading zero):
// exact as the parser's float64, and any time until the year 33658.
func plainInt(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 12 || (v[0] == '0' && len(v) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// plainDate is an integer NumericDate, as the parser makes it.
func plainDate(v []byte) (*jwt.NumericDate, bool) {
	n, ok := plainInt(v)
	if !ok {
		return nil, false
	}
	return jwt.NewNumericDate(time.Unix(n, 0)), true
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
