package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInvalidCampaignMessages: a refused spec is answered with the field
// and the reason, from the engine's typed error, whether the spec was
// refused before Redis or by the Redis clock.
func TestInvalidCampaignMessages(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	cases := []struct{ body, msg string }{
		{`{"total":"1.00","count":101}`, "invalid campaign: total: 100 cents cannot give 101 packets of at least 1 cent"},
		{`{"total":"10.00","count":2,"split":"magic"}`, `invalid campaign: split: unknown "magic"; valid: double-average, line-cut, fixed`},
		{`{"total":"10.00","count":2,"min":"5.00","max":"1.00"}`, "invalid campaign: max: 100 cents is below min 500 cents"},
		{`{"total":"10.00","count":2,"closes_at":"` + past + `"}`, "invalid campaign: closes_at: is already past"},
		{`{"total":"10.00","count":2,"opens_at":"2001-01-01T00:00:00Z"}`,
			"invalid campaign: opens_at: the campaign would close 24h0m0s after it, which is already past"},
		{`{"total":"10.00","count":2,"shards":0}`, "shards must be within 1 and 256"},
		{`{"total":"10.00","count":2,"shards":-3}`, "shards must be within 1 and 256"},
		{`{"total":"10.00","count":2,"shards":257}`, "shards must be within 1 and 256"},
		{`{"total":"10.00","count":2,"shards":3}`, "invalid campaign: shards: 3 shards need at least as many packets, got 2"},
		{`{"total":"1.00","count":1,"bonus":1}`, `unknown field "bonus"`},
		{`{"bonus":1,"total":5}`, `unknown field "bonus"`},
		{`{"total":5,"bonus":1}`, `field "total": wrong type (number)`},
	}
	for _, tc := range cases {
		r := ts.do(t, "POST", "/v1/campaigns", string(adminKey), tc.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tc.body, r.Body)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &e))
		require.Equal(t, tc.msg, e.Error.Message, tc.body)
	}
	r := ts.do(t, "POST", "/v1/campaigns/x/grab", token(t, "erin"), `{"User":1}`)
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Contains(t, string(r.Body), `unknown field \"User\"`)
}
