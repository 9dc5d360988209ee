package httpapi_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// TestOpenAPICoversRoutes fails when a route exists that the document
// lacks, or the document lists one that does not exist (kin-openapi checks
// the document and the replies, not that it matches the server's routes).
// The routes of the demo mode are marked x-demo-only, and exist only in
// that mode.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	demo := newTestServer(t, func(c *httpapi.Config) {
		c.Demo = &httpapi.Demo{Campaign: func() string { return "demo" }}
	})
	doc, err := openapitest.Doc()
	require.NoError(t, err)
	routes := func(s *httpapi.Server) []string {
		var out []string
		for _, r := range s.Routes() {
			method, path, ok := strings.Cut(r, " ")
			require.True(t, ok, "route %q has no method", r)
			out = append(out, method+" "+path)
		}
		sort.Strings(out)
		return out
	}
	var documented, always []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented = append(documented, method+" "+path)
			if demoOnly, _ := op.Extensions["x-demo-only"].(bool); !demoOnly {
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
