package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPauseAndBlockOverHTTP: pause and resume, block, list and unblock a
// campaign with the admin key; grabs answer paused and blocked, holders
// keep their packet, and the metrics count both outcomes. Every reply is
// held to openapi.json.
func TestPauseAndBlockOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	admin := string(adminKey)
	id := ts.create(t, `{"total":"10.00","count":10,"shards":2}`)
	base := "/v1/campaigns/" + id
	grab := func(user string) string {
		r := ts.do(t, "POST", base+"/grab", token(t, user), "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return r.json(t)["outcome"].(string)
	}
	require.Equal(t, "granted", grab("u1"))

	for _, path := range []string{"/pause", "/resume", "/blocked", "/blocked/remove"} {
		r := ts.do(t, "POST", base+path, token(t, "u1"), `{"users":["u1"]}`)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s with a user token", path)
		r = ts.do(t, "POST", base+path, "", `{"users":["u1"]}`)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s without credentials", path)
	}
	require.Equal(t, http.StatusUnauthorized, ts.do(t, "GET", base+"/blocked", token(t, "u1"), "").Status)

	r := ts.do(t, "POST", base+"/pause", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	st := r.json(t)
	require.Equal(t, true, st["paused"])
	require.EqualValues(t, 2, st["paused_shards"])
	ts.waitMetric(t, `hongbao_campaign_paused{campaign="`+id+`"} 1`)
	require.Equal(t, "paused", grab("u2"))
	require.Equal(t, "already_granted", grab("u1"))
	r = ts.do(t, "GET", base, admin, "")
	require.Equal(t, true, r.json(t)["paused"])
	r = ts.do(t, "POST", base+"/resume", admin, "{}")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, false, r.json(t)["paused"])
	require.EqualValues(t, 0, r.json(t)["paused_shards"])
	require.Equal(t, "granted", grab("u2"))
	ts.waitMetric(t, `hongbao_campaign_paused{campaign="`+id+`"} 0`) // the state is read at most once a second

	r = ts.do(t, "POST", base+"/blocked", admin, `{"users":["u3","u4","u3"]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.EqualValues(t, 2, r.json(t)["added"])
	require.NotContains(t, r.json(t), "removed")
	require.Equal(t, "blocked", grab("u3"))
	require.Equal(t, "blocked", grab("u4"))
	r = ts.do(t, "GET", base+"/blocked", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	users := r.json(t)["users"].([]any)
	require.Len(t, users, 2)
	require.Equal(t, "u3", users[0].(map[string]any)["user"])
	r = ts.do(t, "GET", base, admin, "")
	require.EqualValues(t, 2, r.json(t)["blocked_users"])
	r = ts.do(t, "POST", base+"/blocked/remove", admin, `{"users":["u3","u9"]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.EqualValues(t, 1, r.json(t)["removed"])
	require.Equal(t, "granted", grab("u3"))
	require.Equal(t, "blocked", grab("u4"))

	for _, body := range []string{"", `{}`, `{"users":[]}`, `{"users":["bad user"]}`, `{"users":"u1"}`, `{"users":["u1"],"x":1}`,
		`{"users":[` + strings.Repeat(`"u",`, 1000) + `"u"]}`} {
		r := ts.do(t, "POST", base+"/blocked", admin, body)
		require.Equal(t, http.StatusBadRequest, r.Status, "body %.40s: %s", body, r.Body)
	}
	require.Equal(t, http.StatusBadRequest, ts.do(t, "POST", base+"/pause", admin, `{"x":1}`).Status)
	require.Equal(t, http.StatusNotFound, ts.do(t, "POST", "/v1/campaigns/nope/pause", admin, "").Status)
	require.Equal(t, http.StatusNotFound, ts.do(t, "POST", "/v1/campaigns/nope/blocked", admin, `{"users":["u1"]}`).Status)
	require.Equal(t, http.StatusNotFound, ts.do(t, "GET", "/v1/campaigns/nope/blocked", admin, "").Status)

	m := ts.metrics(t)
	require.Contains(t, m, `hongbao_grabs_total{outcome="paused"} 1`)
	require.Contains(t, m, `hongbao_grabs_total{outcome="blocked"} 3`)
}

// TestDiscountPauseAndBlockOverHTTP: the same for a discount campaign.
func TestDiscountPauseAndBlockOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	admin := string(adminKey)
	id := ts.createDiscount(t, `{"budget":"20.00","quota":20,"min":"1.00","max":"1.00"}`)
	base := "/v1/discounts/" + id
	reserve := func(user, order string) string {
		r := ts.do(t, "POST", base+"/reserve", string(paymentKey), `{"user_id":"`+user+`","order_id":"`+order+`","order_amount":"9.99"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return r.json(t)["outcome"].(string)
	}
	require.Equal(t, "reserved", reserve("a", "1"))
	r := ts.do(t, "POST", base+"/pause", string(paymentKey), "")
	require.Equal(t, http.StatusUnauthorized, r.Status, "the payment key cannot pause")
	r = ts.do(t, "POST", base+"/pause", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, true, r.json(t)["paused"])
	require.Equal(t, "paused", reserve("b", "1"))
	require.Equal(t, "already", reserve("a", "1"))
	r = ts.do(t, "POST", base+"/orders/1/confirm", string(paymentKey), `{"user_id":"a"}`)
	require.Equal(t, http.StatusOK, r.Status, "a confirm goes on while paused: %s", r.Body)
	r = ts.do(t, "POST", base+"/resume", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "reserved", reserve("b", "1"))

	r = ts.do(t, "POST", base+"/blocked", admin, `{"users":["c"]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "blocked", reserve("c", "1"))
	r = ts.do(t, "GET", base+"/blocked", admin, "")
	require.Len(t, r.json(t)["users"], 1)
	r = ts.do(t, "POST", base+"/blocked/remove", admin, `{"users":["c"]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "reserved", reserve("c", "2"))
	m := ts.metrics(t)
	require.Contains(t, m, `hongbao_discount_reserves_total{outcome="paused"} 1`)
	require.Contains(t, m, `hongbao_discount_reserves_total{outcome="blocked"} 1`)
}

// waitMetric waits until /metrics has the line.
func (ts *testServer) waitMetric(t *testing.T, line string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(ts.metrics(t), line+"\n") }, 10*time.Second, 50*time.Millisecond, line)
}

func (ts *testServer) metrics(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+string(adminKey))
	res, err := ts.Client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	return string(b)
}
