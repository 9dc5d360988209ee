package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

func requireRetryAfter(t *testing.T, r reply) {
	t.Helper()
	s, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
	require.GreaterOrEqual(t, s, 1)
}

func TestUserRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.UserRate, c.UserBurst = 1, 3
		c.Now = func() time.Time { return now } // the clock stands still: no refill
	})
	id := ts.create(t, `{"total":"1.00","count":2}`)
	tok, err := httpapi.MintToken(userSecret, "eager", time.Hour, time.Now())
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "").Status)
	}
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "")
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	require.Equal(t, "rate_limited", r.errorCode(t))
	requireRetryAfter(t, r)
	// Another user is not limited.
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "calm"), "").Status)
}

func TestIPRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.IPRate, c.IPBurst = 1, 2
		c.Now = func() time.Time { return now }
	})
	id := "nope"
	for i := 0; i < 2; i++ {
		ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", token(t, fmt.Sprint("ip", i)), "")
	}
	r := ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", token(t, "ip3"), "")
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	require.Equal(t, "rate_limited", r.errorCode(t))
	requireRetryAfter(t, r)
}

// TestGlobalRateLimitIsShared: two servers on one Redis draw from one
// budget per second.
func TestGlobalRateLimitIsShared(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"}) // its own counters
	// Inside one second of the clock, so the budget does not renew.
	now := time.Unix(time.Now().Unix()+3600, 0)
	mk := func() *testServer {
		return newTestServer(t, func(c *httpapi.Config) {
			eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
			require.NoError(t, err)
			c.Engine, c.Settlement = eng, settle.NewBacklogs(r.Client, "")
			c.GlobalRate = 10
			c.Now = func() time.Time { return now }
		})
	}
	a, b := mk(), mk()
	ok, limited := 0, 0
	for i := 0; i < 30; i++ {
		ts := a
		if i%2 == 1 {
			ts = b
		}
		rep := ts.do(t, "GET", "/v1/campaigns/none/grants/me", token(t, fmt.Sprint("g", i)), "")
		if rep.Status == http.StatusTooManyRequests {
			require.Equal(t, "rate_limited", rep.errorCode(t))
			requireRetryAfter(t, rep)
			limited++
		} else {
			ok++
		}
	}
	require.Equal(t, 10, ok)
	require.Equal(t, 20, limited)
}

// TestBusyAnswers503: with the engine's queue full, a grab answers 503
// busy with Retry-After instead of waiting.
func TestBusyAnswers503(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, MaxBatch: 1, MaxQueue: 1})
	require.NoError(t, err)
	ts := newTestServer(t, func(c *httpapi.Config) { c.Engine, c.Settlement = eng, settle.NewBacklogs(r.Client, "") })
	id := ts.create(t, `{"total":"10.00","count":100}`)

	// Freeze Redis for a moment: the first grab's batch waits in Redis,
	// the next one fills the queue, and later ones are refused.
	pauser := testenv.Client(t, r.Addr)
	require.NoError(t, pauser.Do(context.Background(), pauser.B().ClientPause().Timeout(3000).All().Build()).Error())
	var wg sync.WaitGroup
	defer wg.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; ; i++ {
		require.True(t, time.Now().Before(deadline), "no grab was refused as busy")
		tok := token(t, fmt.Sprint("busy", i))
		res := make(chan reply, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ts.try("POST", "/v1/campaigns/"+id+"/grab", tok, "")
			if err != nil {
				t.Errorf("grab: %v", err)
			}
			res <- r
		}()
		select {
		case rep := <-res:
			if rep.Status == http.StatusServiceUnavailable && rep.Header.Get("Retry-After") != "" {
				require.Equal(t, "busy", rep.errorCode(t))
				requireRetryAfter(t, rep)
				return
			}
		case <-time.After(20 * time.Millisecond):
			// Still waiting in the queue or in Redis: send the next one.
		}
	}
}
