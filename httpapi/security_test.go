package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
)

func signed(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims, hdr map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range hdr {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func TestTokensRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.create(t, `{"total":"1.00","count":1}`)
	exp := time.Now().Add(time.Hour).Unix()
	b64 := base64.RawURLEncoding.EncodeToString
	good := jwt.MapClaims{"sub": "alice", "exp": exp}
	cases := map[string]string{
		"missing":        "",
		"garbage":        "not-a-token",
		"expired":        signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()}, map[string]any{"kid": "k1"}),
		"no exp":         signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "alice"}, map[string]any{"kid": "k1"}),
		"other secret":   signed(t, jwt.SigningMethodHS256, []byte("some-other-secret-0123456789abcdefgh"), good, map[string]any{"kid": "k1"}),
		"unknown kid":    signed(t, jwt.SigningMethodHS256, userSecret.Key, good, map[string]any{"kid": "k9"}),
		"kid of other":   signed(t, jwt.SigningMethodHS256, userSecret.Key, good, map[string]any{"kid": "k2"}),
		"no sub":         signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"exp": exp}, map[string]any{"kid": "k1"}),
		"bad sub":        signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "a b}", "exp": exp}, map[string]any{"kid": "k1"}),
		"long sub":       signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": strings.Repeat("a", 65), "exp": exp}, map[string]any{"kid": "k1"}),
		"HS384":          signed(t, jwt.SigningMethodHS384, userSecret.Key, good, map[string]any{"kid": "k1"}),
		"alg none":       signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good, nil),
		"alg none kid":   b64([]byte(`{"alg":"none","typ":"JWT","kid":"k1"}`)) + "." + b64([]byte(`{"sub":"alice","exp":9999999999}`)) + ".",
		"badly signed":   signed(t, jwt.SigningMethodHS256, userSecret.Key, good, map[string]any{"kid": "k1"}) + "x",
		"not yet valid":  signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "alice", "exp": exp, "nbf": time.Now().Add(time.Hour).Unix()}, map[string]any{"kid": "k1"}),
		"admin key":      string(adminKey),
		"basic scheme":   "",
		"tampered claim": "",
	}
	// A valid token whose payload is swapped for another user's.
	valid := token(t, "alice")
	parts := strings.Split(valid, ".")
	cases["tampered claim"] = parts[0] + "." + b64([]byte(`{"sub":"mallory","exp":9999999999}`)) + "." + parts[2]
	for name, tok := range cases {
		for _, path := range []string{"/v1/campaigns/" + id + "/grab", "/v1/campaigns/" + id + "/grants/me"} {
			method := "POST"
			if strings.HasSuffix(path, "/me") {
				method = "GET"
			}
			var r reply
			if name == "basic scheme" {
				r = ts.do(t, method, path, "", "", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:pw")))
			} else {
				r = ts.do(t, method, path, tok, "")
			}
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s %s: %s", name, path, r.Body)
			require.Equal(t, "unauthorized", r.errorCode(t), name)
		}
	}
	// The same secret under both kinds of header works: the control.
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", valid, "").Status)
	noKid := signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "bob", "exp": exp}, nil)
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", noKid, "").Status)
	rotated, err := httpapi.MintToken(userSecret2, "carol", time.Hour, time.Now())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", rotated, "").Status)
	// Expired a moment ago, within the leeway: accepted.
	justExpired := signed(t, jwt.SigningMethodHS256, userSecret.Key, jwt.MapClaims{"sub": "dave", "exp": time.Now().Add(-5 * time.Second).Unix()}, map[string]any{"kid": "k1"})
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", justExpired, "").Status)
}

func TestAdminRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.create(t, `{"total":"1.00","count":1}`)
	user := token(t, "alice")
	for _, auth := range []string{"", user, "wrong-admin-key-0123456789abcdefghijk", string(adminKey) + "x", string(adminKey[:len(adminKey)-1])} {
		for _, rq := range [][3]string{
			{"POST", "/v1/campaigns", `{"total":"1.00","count":1}`},
			{"GET", "/v1/campaigns/" + id, ""},
			{"POST", "/v1/campaigns/" + id + "/close", ""},
		} {
			r := ts.do(t, rq[0], rq[1], auth, rq[2])
			require.Equal(t, http.StatusUnauthorized, r.Status, "%v with %q: %s", rq, auth, r.Body)
			require.Equal(t, "unauthorized", r.errorCode(t))
		}
	}
	st := ts.do(t, "GET", "/v1/campaigns/"+id, string(adminKey), "")
	require.Equal(t, "open", st.json(t)["state"])
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1024 })
	id := ts.create(t, `{"total":"1.00","count":1}`)
	admin := string(adminKey)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed", "POST", "/v1/campaigns", `{"total":`, 400, "invalid_json"},
		{"not an object", "POST", "/v1/campaigns", `[1,2]`, 400, "invalid_json"},
		{"empty", "POST", "/v1/campaigns", ``, 400, "invalid_json"},
		{"unknown field", "POST", "/v1/campaigns", `{"total":"1.00","count":1,"bonus":1}`, 400, "invalid_json"},
		{"trailing data", "POST", "/v1/campaigns", `{"total":"1.00","count":1} {}`, 400, "invalid_json"},
		{"key in another case", "POST", "/v1/campaigns", `{"TOTAL":"1.00","count":1}`, 400, "invalid_json"},
		{"key twice", "POST", "/v1/campaigns", `{"total":"1.00","count":1,"total":"2.00"}`, 400, "invalid_json"},
		{"null", "POST", "/v1/campaigns", `null`, 400, "invalid_json"},
		{"both totals", "POST", "/v1/campaigns", `{"total":"1.00","total_cents":100,"count":1}`, 400, "invalid_request"},
		{"no total", "POST", "/v1/campaigns", `{"count":1}`, 400, "invalid_request"},
		{"no count", "POST", "/v1/campaigns", `{"total":"1.00"}`, 400, "invalid_request"},
		{"float total", "POST", "/v1/campaigns", `{"total":1.5,"count":1}`, 400, "invalid_json"},
		{"float cents", "POST", "/v1/campaigns", `{"total_cents":150.5,"count":1}`, 400, "invalid_json"},
		{"three decimals", "POST", "/v1/campaigns", `{"total":"1.005","count":1}`, 400, "invalid_request"},
		{"negative cents", "POST", "/v1/campaigns", `{"total_cents":-100,"count":1}`, 400, "invalid_request"},
		{"absurd total", "POST", "/v1/campaigns", `{"total":"99999999999999999999.00","count":1}`, 400, "invalid_request"},
		{"absurd cents", "POST", "/v1/campaigns", `{"total_cents":9007199254740993,"count":1}`, 400, "invalid_request"},
		{"int64 overflow", "POST", "/v1/campaigns", `{"total_cents":99999999999999999999,"count":1}`, 400, "invalid_json"},
		{"absurd count", "POST", "/v1/campaigns", `{"total":"1.00","count":1000000000}`, 400, "invalid_request"},
		{"more packets than cents", "POST", "/v1/campaigns", `{"total":"1.00","count":101}`, 400, "invalid_request"},
		{"min over max", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"min":"5.00","max":"1.00"}`, 400, "invalid_request"},
		{"both mins", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"min":"1.00","min_cents":100}`, 400, "invalid_request"},
		{"bad split", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"split":"magic"}`, 400, "invalid_request"},
		{"bad time", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"opens_at":"tomorrow"}`, 400, "invalid_request"},
		{"closes before opens", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"opens_at":"2030-01-02T00:00:00Z","closes_at":"2030-01-01T00:00:00Z"}`, 400, "invalid_request"},
		{"closes in the past", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"closes_at":"2001-01-01T00:00:00Z"}`, 400, "invalid_request"},
		{"bad funding", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"funding_account":"a b"}`, 400, "invalid_request"},
		{"negative seed", "POST", "/v1/campaigns", `{"total":"10.00","count":2,"seed":-1}`, 400, "invalid_json"},
		{"huge body", "POST", "/v1/campaigns", `{"total":"1.00","count":1,"split":"` + strings.Repeat("x", 4096) + `"}`, 413, "body_too_large"},
		{"unknown campaign", "GET", "/v1/campaigns/no-such-campaign", ``, 404, "not_found"},
		{"bad campaign id", "GET", "/v1/campaigns/" + strings.Repeat("x", 65), ``, 400, "invalid_id"},
		{"close unknown", "POST", "/v1/campaigns/no-such-campaign/close", ``, 404, "not_found"},
		{"close with body", "POST", "/v1/campaigns/" + id + "/close", `{"now":true}`, 400, "invalid_json"},
		{"no such route", "GET", "/v2/things", ``, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(t, tc.method, tc.path, admin, tc.body)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			require.Equal(t, tc.code, r.errorCode(t))
			require.NotContains(t, string(r.Body), "hongbao: ")
			require.NotContains(t, string(r.Body), "redis")
		})
	}
	user := token(t, "alice")
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"grab unknown campaign", "POST", "/v1/campaigns/no-such-campaign/grab", ``, 404, "not_found"},
		{"grab bad id", "POST", "/v1/campaigns/a.b/grab", ``, 400, "invalid_id"},
		{"grab with a body", "POST", "/v1/campaigns/" + id + "/grab", `{"user":"bob"}`, 400, "invalid_json"},
		{"grab huge body", "POST", "/v1/campaigns/" + id + "/grab", strings.Repeat(" ", 2048), 413, "body_too_large"},
		{"mine unknown campaign", "GET", "/v1/campaigns/no-such-campaign/grants/me", ``, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(t, tc.method, tc.path, user, tc.body)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			require.Equal(t, tc.code, r.errorCode(t))
		})
	}
	// An empty JSON object is an empty body.
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", user, `{}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "granted", r.json(t)["outcome"])
}

// TestVerifiedTokenStillExpires: a token verified once (and cached) is
// refused once it expires, and a changed token is verified anew.
func TestVerifiedTokenStillExpires(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().Unix())
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Now = func() time.Time { return time.Unix(now.Load(), 0) }
		c.UserRate = -1
	})
	id := ts.create(t, `{"total":"1.00","count":1}`)
	tok, err := httpapi.MintToken(userSecret, "erin", time.Minute, time.Unix(now.Load(), 0))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NotEqual(t, http.StatusUnauthorized, ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", tok, "").Status, "%d", i)
	}
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "")
	require.Equal(t, http.StatusOK, r.Status)
	// Alter one signature character: not the cached token any more.
	bad := tok[:len(tok)-2] + string("AB"[(tok[len(tok)-2]+1)%2]) + tok[len(tok)-1:]
	if bad != tok {
		r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", bad, "")
		require.Equal(t, http.StatusUnauthorized, r.Status)
	}
	now.Add(int64(time.Minute/time.Second) + 31) // past exp and the 30s leeway
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "")
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	require.Equal(t, "unauthorized", r.errorCode(t))
}

// TestTokenScope: with an issuer and an audience set, a token must carry
// both (aud is then required); iat must not lie in the future; and a token
// living longer than the maximum age (24h by default) is refused, whether
// its iat says so or, without iat, its exp does.
func TestTokenScope(t *testing.T) {
	t.Parallel()
	scope := httpapi.TokenScope{Issuer: "https://id.example", Audience: "hongbao"}
	scoped := newTestServer(t, func(c *httpapi.Config) { c.Token = scope; c.UserRate = -1 })
	plain := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	now := time.Now()
	tenYears := now.Add(10 * 365 * 24 * time.Hour).Unix()
	hour := now.Add(time.Hour).Unix()
	kid := map[string]any{"kid": "k1"}
	claims := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "exp": hour, "iat": now.Unix(), "iss": scope.Issuer, "aud": scope.Audience}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	grab := func(ts *testServer, tok string) reply {
		id := ts.create(t, `{"total":"1.00","count":1}`)
		return ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", tok, "")
	}
	for name, c := range map[string]jwt.MapClaims{
		"wrong audience":   claims(jwt.MapClaims{"aud": "someone-else"}),
		"no audience":      claims(jwt.MapClaims{"aud": nil}),
		"wrong issuer":     claims(jwt.MapClaims{"iss": "https://evil.example"}),
		"no issuer":        claims(jwt.MapClaims{"iss": nil}),
		"10-year lifetime": claims(jwt.MapClaims{"exp": tenYears}),
		"10 years, no iat": claims(jwt.MapClaims{"exp": tenYears, "iat": nil}),
		"iat in future":    claims(jwt.MapClaims{"iat": now.Add(time.Hour).Unix(), "exp": now.Add(2 * time.Hour).Unix()}),
	} {
		r := grab(scoped, signed(t, jwt.SigningMethodHS256, userSecret.Key, c, kid))
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r.Body)
	}
	good, err := httpapi.MintScopedToken(userSecret, scope, "alice", time.Hour, now)
	require.NoError(t, err)
	r := grab(scoped, good)
	require.Equal(t, http.StatusNotFound, r.Status, "a good token reaches the route (no grant yet): %s", r.Body)
	require.Equal(t, "no_grant", r.errorCode(t))
	r = grab(scoped, token(t, "alice"))
	require.Equal(t, http.StatusUnauthorized, r.Status, "a token without the scope")

	// Without a scope set, iss and aud are not checked, but the lifetime is.
	r = grab(plain, signed(t, jwt.SigningMethodHS256, userSecret.Key, claims(jwt.MapClaims{"exp": tenYears}), kid))
	require.Equal(t, http.StatusUnauthorized, r.Status, "a 10-year token: %s", r.Body)
	r = grab(plain, signed(t, jwt.SigningMethodHS256, userSecret.Key, claims(nil), kid))
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
}
