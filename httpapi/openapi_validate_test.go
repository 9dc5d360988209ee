package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

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
