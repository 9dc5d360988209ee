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
// lacks, or the document lists one that does not exist.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(httpapi.OpenAPI(), &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	var routes, documented []string
	for _, r := range ts.Server.Routes() {
		method, path, ok := strings.Cut(r, " ")
		require.True(t, ok, "route %q has no method", r)
		routes = append(routes, strings.ToLower(method)+" "+path)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	require.Equal(t, routes, documented)

	// And it is what /openapi.json serves.
	r := ts.do(t, "GET", "/openapi.json", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, string(httpapi.OpenAPI()), string(r.Body))
}
