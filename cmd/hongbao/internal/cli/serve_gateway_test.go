package cli

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestServeGatewayBatch: serve takes a gateway key from its config file
// (gateway-key-file), and a batch of grabs under it answers each user in
// the request's order, the retry the same packets; a user token is
// forbidden there, the admin key is served, and a batch with a bad id
// grants nothing. Every reply is checked against openapi.json.
func TestServeGatewayBatch(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gwFile := writeSecret(t, fx.dir, "gateway.key")
	cfg := writeConfig(t, fmt.Sprintf("serve:\n  gateway-key-file: [%s]\n", gwFile))
	p := startServe(t, fx.args("--config", cfg, "--user-rate", "-1")...)
	api := fx.api(t, p.URL)
	gw, err := os.ReadFile(gwFile)
	require.NoError(t, err)
	gateway := strings.TrimSpace(string(gw))

	code, m, err := api.call("POST", p.URL+"/v1/campaigns", api.admin, `{"total":"5.00","count":4,"min":"0.01"}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	id := m["id"].(string)
	url := p.URL + "/v1/campaigns/" + id + "/grabs"

	// A bad id refuses the whole batch: nothing granted.
	code, m, err = api.call("POST", url, gateway, `{"users":["ann","b b"]}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, code, "%v", m)
	// A user token is forbidden.
	code, m, err = api.call("POST", url, api.userToken(t, "ann"), `{"users":["ann"]}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code, "%v", m)
	require.Equal(t, "forbidden", m["error"].(map[string]any)["code"])

	users := []string{"ann", "bob", "cy", "ann", "dee", "eve"}
	body := `{"users":["ann","bob","cy","ann","dee","eve"]}`
	results := func(auth string) []map[string]any {
		t.Helper()
		code, m, err := api.call("POST", url, auth, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%v", m)
		var out []map[string]any
		for _, r := range m["results"].([]any) {
			out = append(out, r.(map[string]any))
		}
		require.Len(t, out, len(users))
		for i, r := range out {
			require.Equal(t, users[i], r["user_id"])
		}
		return out
	}
	first := results(gateway)
	var granted int
	var cents float64
	for i, r := range first {
		if i == 3 {
			continue // ann again
		}
		if r["outcome"] == "granted" {
			granted++
			cents += r["amount_cents"].(float64)
		} else {
			require.Equal(t, "sold_out", r["outcome"])
		}
	}
	require.Equal(t, 4, granted)
	require.EqualValues(t, 500, cents)
	if first[0]["outcome"] == "granted" {
		require.Equal(t, "already_granted", first[3]["outcome"])
		require.Equal(t, first[0]["packet_id"], first[3]["packet_id"])
	}

	// The retry, under the admin key, answers the same packets.
	again := results(api.admin)
	for i, r := range again {
		if first[i]["packet_id"] == nil {
			require.Equal(t, "sold_out", r["outcome"])
			continue
		}
		require.Equal(t, "already_granted", r["outcome"])
		require.Equal(t, first[i]["packet_id"], r["packet_id"])
		require.Equal(t, first[i]["amount_cents"], r["amount_cents"])
	}

	code, m, err = api.call("GET", p.URL+"/v1/campaigns/"+id, api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)
	require.EqualValues(t, 4, m["granted_count"])
}
