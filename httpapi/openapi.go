package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the service. Tests fail when a
// route is missing from it, and check every reply the API tests receive
// against it with kin-openapi.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3 document served at /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPI)
}
