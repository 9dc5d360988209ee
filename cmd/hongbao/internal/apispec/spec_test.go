package apispec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckedInIsGenerated fails when httpapi/openapi.json is not what
// Document builds from the table: run make openapi.
func TestCheckedInIsGenerated(t *testing.T) {
	t.Parallel()
	want, err := Document()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "httpapi", "openapi.json"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "httpapi/openapi.json is not generated from the table: run make openapi")
}

// TestErrorResponsesUsed: every shared error answer is some route's, and
// states its status's error shape.
func TestErrorResponsesUsed(t *testing.T) {
	t.Parallel()
	used := map[string]bool{}
	for _, r := range routes {
		for _, e := range r.Errors {
			used[e] = true
		}
	}
	for name := range errorResponses {
		require.True(t, used[name], "error response %s is no route's", name)
	}
}
