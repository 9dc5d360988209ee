package httpapi_test

import (
	"encoding/json"
	"go/parser"
	gotoken "go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneRoadToRedis: the HTTP layer reaches Redis only through the
// engine and package settle, never through the store.
func TestOneRoadToRedis(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := gotoken.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.NotContains(t, path, "/internal/", "%s imports %s", f, path)
		}
	}
}

// TestSettlementAndMyGrant: a campaign's answer carries its settlement
// backlog, and grants/me the user's packet, read through the engine.
func TestSettlementAndMyGrant(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.create(t, `{"total":"3.00","count":3,"split":"fixed"}`)
	admin := string(adminKey)
	settlement := func() map[string]any {
		t.Helper()
		r := ts.do(t, "GET", "/v1/campaigns/"+id, admin, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		s, ok := r.json(t)["settlement"].(map[string]any)
		require.True(t, ok, "%s", r.Body)
		return s
	}
	require.Equal(t, map[string]any{"lag_entries": 0.0, "pending_entries": 0.0, "dead_entries": 0.0}, settlement())

	tok := token(t, "carol")
	r := ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", tok, "")
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, "no_grant", r.errorCode(t))
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	granted := r.json(t)
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "dave"), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]any{"lag_entries": 2.0, "pending_entries": 0.0, "dead_entries": 0.0}, settlement(),
		"two grab calls, two batches waiting for a worker")

	r = ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", tok, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var mine map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &mine))
	require.Equal(t, map[string]any{
		"campaign": id, "packet_id": granted["packet_id"], "amount": "1.00", "amount_cents": 100.0,
	}, mine)

	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/close", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.EqualValues(t, 2, r.json(t)["settlement"].(map[string]any)["lag_entries"])
}
