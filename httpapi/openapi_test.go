package httpapi_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
)

// TestOpenAPICoversRoutes fails when a route exists that the document
// lacks, or the document lists one that does not exist. The routes of the
// demo mode are marked x-demo-only, and exist only in that mode.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	demo := newTestServer(t, func(c *httpapi.Config) {
		c.Demo = &httpapi.Demo{Campaign: func() string { return "demo" }}
	})
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			DemoOnly bool `json:"x-demo-only"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(httpapi.OpenAPI(), &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	routes := func(s *httpapi.Server) []string {
		var out []string
		for _, r := range s.Routes() {
			method, path, ok := strings.Cut(r, " ")
			require.True(t, ok, "route %q has no method", r)
			out = append(out, strings.ToLower(method)+" "+path)
		}
		sort.Strings(out)
		return out
	}
	var documented, always []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, method+" "+path)
			if !op.DemoOnly {
				always = append(always, method+" "+path)
			}
		}
	}
	sort.Strings(documented)
	sort.Strings(always)
	require.Equal(t, routes(demo.Server), documented)
	require.Equal(t, routes(ts.Server), always)

	// And it is what /openapi.json serves.
	r := ts.do(t, "GET", "/openapi.json", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, string(httpapi.OpenAPI()), string(r.Body))
}
