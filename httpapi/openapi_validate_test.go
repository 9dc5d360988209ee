package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
)

// spec is openapi.json loaded and checked by kin-openapi, once per test
// binary, with a router to find each request's operation.
type spec struct {
	doc    *openapi3.T
	router routers.Router
}

var loadSpec = sync.OnceValues(func() (*spec, error) {
	// The live view's body is a stream of text events; its events are
	// checked one by one against LiveView where the tests read them.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
	}
	closeObjects(doc)
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.json: %w", err)
	}
	return &spec{doc: doc, router: r}, nil
})

// checkOpenAPI validates a response against openapi.json: its status must
// be documented for the operation, its Content-Type among the documented
// ones and its body must match the schema. When the server accepted the
// request (2xx), the request must match the document too; requests the
// server refuses are often malformed on purpose.
//
// Paths that are not in the document are not checked: the console's pages
// and assets (HTML, CSS, JS under /console, not an API) and the catch-all
// 404 in the error shape for unknown routes. TestOpenAPICoversRoutes keeps
// every API route in the document.
func checkOpenAPI(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	route, params, err := s.router.FindRoute(req)
	var re *routers.RouteError
	if errors.As(err, &re) && (re.Reason == routers.ErrPathNotFound.Error() || re.Reason == routers.ErrMethodNotAllowed.Error()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("openapi: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if len(reqBody) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		// The server reads every body as JSON whatever its Content-Type,
		// and the tests mostly send none.
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	ctx := context.Background()
	if status >= 200 && status < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("openapi: request %s %s (answered %d) does not match openapi.json: %w", req.Method, req.URL.Path, status, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Options: in.Options,
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("openapi: response %d to %s %s does not match openapi.json: %w\nbody: %s", status, req.Method, req.URL.Path, err, truncate(body))
	}
	return nil
}

func truncate(b []byte) string {
	const most = 2000
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return strings.TrimSpace(string(b))
}

// validateLiveView checks one event of the live view against LiveView.
func validateLiveView(data []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return s.doc.Components.Schemas["LiveView"].Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse())
}

// closeObjects makes every object schema of the document that lists its
// properties refuse others, in the tests only: the published document
// leaves replies open so that fields can be added without breaking
// clients, but the tests hold the server to the fields it documents. An
// allOf of objects becomes one object with the union of their properties
// (each part alone would refuse the other's fields).
func closeObjects(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	for _, ref := range doc.Components.Schemas {
		closeSchema(ref, seen)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				closeSchema(p.Value.Schema, seen)
			}
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Value.Content {
					closeSchema(mt.Schema, seen)
				}
			}
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					closeSchema(mt.Schema, seen)
				}
			}
		}
	}
}

func closeSchema(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	if len(s.AllOf) > 0 {
		props := openapi3.Schemas{}
		var required []string
		for _, part := range s.AllOf {
			closeSchema(part, seen)
			maps.Copy(props, part.Value.Properties)
			required = append(required, part.Value.Required...)
		}
		s.AllOf, s.Type, s.Properties, s.Required = nil, &openapi3.Types{openapi3.TypeObject}, props, required
	}
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		no := false
		s.AdditionalProperties.Has = &no
	}
	for _, p := range s.Properties {
		closeSchema(p, seen)
	}
	closeSchema(s.Items, seen)
	closeSchema(s.AdditionalProperties.Schema, seen)
	for _, alt := range append(append([]*openapi3.SchemaRef(nil), s.OneOf...), s.AnyOf...) {
		closeSchema(alt, seen)
	}
}

// TestOpenAPIDocumentValid: kin-openapi loads openapi.json and finds it a
// valid OpenAPI 3 document.
func TestOpenAPIDocumentValid(t *testing.T) {
	t.Parallel()
	s, err := loadSpec()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s.doc.OpenAPI, "3."), s.doc.OpenAPI)
}

// TestOpenAPICheckRefusesWrongReplies: the check the test helpers run on
// every reply fails a reply the document does not describe, and passes
// one it does.
func TestOpenAPICheckRefusesWrongReplies(t *testing.T) {
	t.Parallel()
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	check := func(method, path string, status int, h http.Header, body string) error {
		req, err := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
		require.NoError(t, err)
		return checkOpenAPI(req, nil, status, h, []byte(body))
	}
	grab := "/v1/campaigns/c1/grab"
	// What the document says.
	require.NoError(t, check("POST", grab, 200, jsonCT, `{"campaign":"c1","outcome":"sold_out"}`))
	require.NoError(t, check("POST", grab, 401, jsonCT, `{"error":{"code":"unauthorized","message":"no token"}}`))
	require.NoError(t, check("GET", "/no/such/route", 404, jsonCT, `{"error":{"code":"not_found","message":"no such route"}}`), "not in the document: not checked")
	for name, c := range map[string]struct {
		status int
		h      http.Header
		body   string
	}{
		"undocumented status":      {http.StatusTeapot, jsonCT, `{"error":{"code":"internal","message":"x"}}`},
		"unknown error code":       {401, jsonCT, `{"error":{"code":"no_such_code","message":"x"}}`},
		"error without message":    {401, jsonCT, `{"error":{"code":"unauthorized"}}`},
		"unknown outcome":          {200, jsonCT, `{"campaign":"c1","outcome":"stalled"}`},
		"missing required field":   {200, jsonCT, `{"campaign":"c1"}`},
		"undocumented field":       {200, jsonCT, `{"campaign":"c1","outcome":"sold_out","extra":1}`},
		"amount as a number":       {200, jsonCT, `{"campaign":"c1","outcome":"granted","amount":1.5}`},
		"wrong content type":       {200, http.Header{"Content-Type": {"text/html"}}, `<p>hi</p>`},
		"not JSON":                 {200, jsonCT, `{"campaign":`},
		"Retry-After not a number": {429, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"soon"}}, `{"error":{"code":"rate_limited","message":"x"}}`},
	} {
		err := check("POST", grab, c.status, c.h, c.body)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "openapi.json", name)
	}
	// A request the server accepted must match the document too.
	req, err := http.NewRequest("POST", "http://127.0.0.1:1/v1/campaigns", nil)
	require.NoError(t, err)
	err = checkOpenAPI(req, []byte(`{"count":"ten"}`), 201, jsonCT, []byte(`{}`))
	require.ErrorContains(t, err, "request POST /v1/campaigns")
}

// TestOpenAPIErrorCodes: the error codes of errors.go are the enum of the
// document's Error, so that a code the tests never provoke is documented
// too.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(gotoken.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != gotoken.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a literal", name.Name)
				code, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				codes = append(codes, code)
			}
		}
	}
	require.NotEmpty(t, codes)
	s, err := loadSpec()
	require.NoError(t, err)
	var enum []string
	for _, v := range s.doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	require.ElementsMatch(t, codes, enum)
}
