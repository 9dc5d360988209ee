package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// newListServer is a test server on a namespace of its own, so that its
// lists hold only the test's campaigns.
func newListServer(t *testing.T) *testServer {
	t.Helper()
	ns := testenv.UniqueID(t)
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Namespace: ns})
	require.NoError(t, err)
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Engine, c.Settlement = eng, settle.NewBacklogs(r.Client, ns)
	})
	ts.Engine = eng
	return ts
}

// pageOf reads one page of a list and returns the ids (users) in it, the
// total and more.
func pageOf(t *testing.T, ts *testServer, path, items, key string) ([]string, int, bool) {
	t.Helper()
	r := ts.do(t, "GET", path, string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
	m := r.json(t)
	var ids []string
	for _, it := range m[items].([]any) {
		ids = append(ids, it.(map[string]any)[key].(string))
	}
	return ids, int(m["total"].(float64)), m["more"].(bool)
}

// TestListPages: the campaign and discount lists and the blocklists
// answer a page at a time (?offset=, ?limit=) with the total, the closed
// campaigns the registries still hold included; the pages, read one after
// the other, hold every item once, in the list's order; a bad offset or
// limit is 400.
func TestListPages(t *testing.T) {
	t.Parallel()
	ts := newListServer(t)
	admin := string(adminKey)
	closes := time.Now().Add(time.Hour).UTC()
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, ts.create(t, fmt.Sprintf(`{"total":"1.00","count":1,"closes_at":%q}`, closes.Add(time.Duration(i)*time.Minute).Format(time.RFC3339))))
	}
	r := ts.do(t, "POST", "/v1/campaigns/"+ids[1]+"/close", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var discounts []string
	for i := 0; i < 3; i++ {
		discounts = append(discounts, ts.createDiscount(t, `{"budget":"5.00","quota":5}`))
	}

	all, total, more := pageOf(t, ts, "/v1/campaigns", "campaigns", "id")
	require.Equal(t, 5, total)
	require.False(t, more)
	require.ElementsMatch(t, ids, all)
	r = ts.do(t, "GET", "/v1/campaigns", admin, "")
	states := map[string]string{}
	for _, c := range r.json(t)["campaigns"].([]any) {
		states[c.(map[string]any)["id"].(string)] = c.(map[string]any)["state"].(string)
	}
	require.Equal(t, "closed", states[ids[1]], "a closed campaign is listed until it is settled")
	require.Equal(t, "open", states[ids[0]])

	var paged []string
	for offset := 0; offset < 5; offset += 2 {
		got, total, more := pageOf(t, ts, fmt.Sprintf("/v1/campaigns?offset=%d&limit=2", offset), "campaigns", "id")
		require.Equal(t, 5, total)
		require.Equal(t, offset+2 < 5, more, "offset %d", offset)
		require.Len(t, got, min(2, 5-offset))
		paged = append(paged, got...)
	}
	require.Equal(t, all, paged, "the pages follow the list's order")
	got, total, more := pageOf(t, ts, "/v1/campaigns?offset=9", "campaigns", "id")
	require.Empty(t, got)
	require.Equal(t, 5, total)
	require.False(t, more)

	all, total, more = pageOf(t, ts, "/v1/discounts", "discounts", "id")
	require.Equal(t, 3, total)
	require.False(t, more)
	require.ElementsMatch(t, discounts, all)
	got, total, more = pageOf(t, ts, "/v1/discounts?limit=2", "discounts", "id")
	require.Len(t, got, 2)
	require.Equal(t, 3, total)
	require.True(t, more)
	r = ts.do(t, "GET", "/v1/discounts?offset=2&limit=2", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	d := r.json(t)["discounts"].([]any)[0].(map[string]any)
	require.Equal(t, all[2], d["id"])
	require.EqualValues(t, 500, d["budget_cents"])
	require.EqualValues(t, 5, d["remaining_count"])
	require.Equal(t, false, d["paused"])

	// The blocklists of both kinds.
	for _, base := range []string{"/v1/campaigns/" + ids[0], "/v1/discounts/" + discounts[0]} {
		r = ts.do(t, "POST", base+"/blocked", admin, `{"users":["u1","u2","u3","u4","u5"]}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var users []string
		for offset := 0; offset < 5; offset += 2 {
			got, total, more := pageOf(t, ts, fmt.Sprintf("%s/blocked?offset=%d&limit=2", base, offset), "users", "user")
			require.Equal(t, 5, total)
			require.Equal(t, offset+2 < 5, more)
			users = append(users, got...)
		}
		require.ElementsMatch(t, []string{"u1", "u2", "u3", "u4", "u5"}, users, base)
		got, total, more := pageOf(t, ts, base+"/blocked", "users", "user")
		require.Len(t, got, 5)
		require.Equal(t, 5, total)
		require.False(t, more)
		require.Equal(t, http.StatusBadRequest, ts.do(t, "GET", base+"/blocked?limit=1001", admin, "").Status)
		require.Equal(t, http.StatusOK, ts.do(t, "GET", base+"/blocked?limit=1000", admin, "").Status)
	}

	for _, path := range []string{"/v1/campaigns", "/v1/discounts", "/v1/campaigns/" + ids[0] + "/blocked", "/v1/discounts/" + discounts[0] + "/blocked"} {
		for _, q := range []string{"limit=0", "offset=-1", "offset=x", "limit=2.5", "limit=1&limit=2", "offset=1073741825"} {
			r := ts.do(t, "GET", path+"?"+q, admin, "")
			require.Equal(t, http.StatusBadRequest, r.Status, "%s?%s: %s", path, q, r.Body)
			require.Equal(t, "invalid_request", r.errorCode(t))
		}
	}
	for _, path := range []string{"/v1/campaigns?limit=201", "/v1/discounts?limit=201"} {
		require.Equal(t, http.StatusBadRequest, ts.do(t, "GET", path, admin, "").Status, path)
	}
	require.Equal(t, http.StatusUnauthorized, ts.do(t, "GET", "/v1/discounts", token(t, "alice"), "").Status)
	require.Equal(t, http.StatusUnauthorized, ts.do(t, "GET", "/v1/discounts", string(paymentKey), "").Status)
	require.Equal(t, http.StatusNotFound, ts.do(t, "GET", "/v1/discounts/nope/blocked?limit=5", admin, "").Status)
}
