package httpapi_test

import (
	"encoding/json"
	"go/parser"
	gotoken "go/token"
	"net/http"
	"os/exec"
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

// TestNoRedisClient: the HTTP layer holds no Redis client. Of the packages
// it builds on, only the engine, settle and the store beneath them import
// one; a handler that reached for Redis itself, or through a new package,
// fails here. (The engine's own Config takes a client, so the module does
// reach one: `go list -deps` of httpapi cannot be free of it.)
func TestNoRedisClient(t *testing.T) {
	t.Parallel()
	const mod = "github.com/hongbao/hongbao"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	allowed := map[string]bool{mod: true, mod + "/settle": true, mod + "/internal/redisstore": true, mod + "/internal/luascript": true}
	var seen []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if strings.HasPrefix(f[0], "github.com/redis/") {
			continue // the client's own packages
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "github.com/redis/") {
				require.True(t, allowed[f[0]], "%s imports the Redis client %s", f[0], imp)
				seen = append(seen, f[0])
			}
		}
	}
	require.Contains(t, seen, mod, "the listing is read: the engine imports the client")
	require.NotContains(t, seen, mod+"/httpapi")
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
