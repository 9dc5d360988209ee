package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestMetricsArePrivate: /metrics on the API's listener answers 401 to
// anyone without a metrics key or an admin key, and tells them no
// campaign id; with a key, and on Server.Metrics (the private listener's
// handler), it serves the campaigns' gauges.
func TestMetricsArePrivate(t *testing.T) {
	t.Parallel()
	scraper := []byte("metrics-key-0123456789abcdefghijklmn")
	ts := newTestServer(t, func(c *httpapi.Config) { c.MetricsKeys = [][]byte{scraper} })
	id := ts.create(t, `{"total":"1.00","count":1}`)
	for _, key := range []string{"", "nope", token(t, "alice"), string(paymentKey)} {
		r := ts.do(t, "GET", "/metrics", key, "")
		require.Equal(t, http.StatusUnauthorized, r.Status, "%q: %s", key, r.Body)
		require.Equal(t, "unauthorized", r.errorCode(t))
		require.NotContains(t, string(r.Body), id)
	}
	for _, key := range [][]byte{scraper, adminKey} {
		r := ts.do(t, "GET", "/metrics", string(key), "")
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, string(r.Body), `campaign="`+id+`"`)
	}
	private := httptest.NewServer(ts.Server.Metrics())
	defer private.Close()
	res, err := ts.Client.Get(private.URL)
	require.NoError(t, err)
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, b.String(), `campaign="`+id+`"`)
}

// TestReadyzShared: a flood of /readyz is one reading of the checks, not
// one per request: readings are kept for a second and shared by
// concurrent callers.
func TestReadyzShared(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Ready = map[string]func(context.Context) error{"ledger": func(context.Context) error { checks.Add(1); return nil }}
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				r, err := ts.try("GET", "/readyz", "", "")
				if err != nil || r.Status != http.StatusOK {
					t.Errorf("readyz: %v %d", err, r.Status)
					return
				}
			}
		}()
	}
	wg.Wait()
	// 320 requests within a second or two: one reading a second.
	require.LessOrEqual(t, checks.Load(), int64(3), "readings for 320 /readyz requests")
	require.Positive(t, checks.Load())
}

// TestFailedAuthSpendsNoBudget: 1,000 requests with bad tokens leave the
// global request budget whole: a user's grab under --global-rate is
// answered, not refused with 429.
func TestFailedAuthSpendsNoBudget(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.GlobalRate = 10
		c.AuthFailRate = -1 // this test is about the global budget alone
	})
	id := ts.create(t, `{"total":"1.00","count":1}`)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 125 {
				r, err := ts.try("POST", "/v1/campaigns/"+id+"/grab", "bad-token-"+string(rune('a'+g))+strings.Repeat("x", i%3), "")
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status == http.StatusUnauthorized {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1000, refused.Load(), "every bad token is 401, none 429")
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "alice"), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "granted", r.json(t)["outcome"])
}

// TestFailedAuthLimitedPerAddress: an address that spent its allowance of
// failed authentications is answered 429 for its further failures, and
// served for valid credentials; an IPv6 address counts by its /64;
// another address is not touched; the failures are logged sampled (not
// one line each); and an admin key is named in the logs by an HMAC, not
// by a plain hash of the key.
func TestFailedAuthLimitedPerAddress(t *testing.T) {
	t.Parallel()
	var logs syncBuf
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.AuthFailRate, c.AuthFailBurst = 0.001, 5
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	id := ts.create(t, `{"total":"1.00","count":1}`)
	call := func(remote, tok string) int {
		req := httptest.NewRequest("POST", "/v1/campaigns/"+id+"/grab", nil)
		req.RemoteAddr = remote
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		ts.Server.ServeHTTP(w, req)
		require.NoError(t, openapitest.Check(req, nil, w.Code, w.Result().Header, w.Body.Bytes()))
		return w.Code
	}
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, call("[2001:db8:1:2::"+string(rune('1'+i))+"]:4000", "bad"), i)
	}
	require.Equal(t, http.StatusTooManyRequests, call("[2001:db8:1:2:ffff::1]:1", "bad"), "the same /64")
	require.Equal(t, http.StatusOK, call("[2001:db8:1:2::9]:1", token(t, "alice")), "a valid token is served from an address past its allowance")
	require.Equal(t, http.StatusTooManyRequests, call("[2001:db8:1:2::9]:1", "bad"), "and a bad one is still refused 429")
	require.Equal(t, http.StatusUnauthorized, call("[2001:db8:1:3::1]:1", "bad"), "another /64")
	require.Equal(t, http.StatusOK, call("192.0.2.7:1", token(t, "alice")))
	require.LessOrEqual(t, strings.Count(logs.String(), "authentications failed"), 2, logs.String())

	// The admin key's fingerprint in the logs is an HMAC under the
	// deployment's salt, not a prefix of the key's SHA-256.
	ts.create(t, `{"total":"1.00","count":1}`)
	sum := sha256.Sum256(adminKey)
	out := logs.String()
	require.Contains(t, out, "who=admin:")
	require.NotContains(t, out, hex.EncodeToString(sum[:4]))
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMetricsCoverEveryCampaign: with more live campaigns than one page
// of the index (200), the listing and the pool gauges show the first page,
// and the settlement gauges still count the backlog of every campaign: an
// unsettled grant of the 201st (the one closing last) shows in the lag.
func TestMetricsCoverEveryCampaign(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"}) // its own index
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now()
	var last string
	for i := range 201 {
		c, err := eng.Create(ctx, hongbao.Spec{Total: 100, Count: 1, ClosesAt: now.Add(time.Hour + time.Duration(i)*time.Minute)})
		require.NoError(t, err)
		last = c.ID
	}
	g, err := eng.Grab(ctx, last, "u1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	s, err := httpapi.New(httpapi.Config{Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""), UserSecrets: []httpapi.Secret{userSecret},
		AdminKeys: [][]byte{adminKey}, Logger: quiet()})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	defer hs.Close()
	ts := &testServer{URL: hs.URL, Client: hs.Client()}

	body := string(ts.do(t, "GET", "/metrics", string(adminKey), "").Body)
	lag := regexp.MustCompile(`\nhongbao_settlement_lag_entries (\S+)\n`).FindStringSubmatch(body)
	require.NotNil(t, lag)
	require.Equal(t, "1", lag[1], "the 201st campaign's grant is counted")
	require.Equal(t, 200, strings.Count(body, "\nhongbao_campaign_pool_remaining_packets{"), "one page of per-campaign series")
	require.False(t, strings.Contains(body, `campaign="`+last+`"`), "the 201st has no series")

	list := ts.do(t, "GET", "/v1/campaigns", string(adminKey), "").json(t)
	require.Len(t, list["campaigns"], 200)
	require.Equal(t, true, list["more"])
}
