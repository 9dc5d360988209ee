// Package openapitest holds the HTTP API to its description,
// httpapi/openapi.json, in tests.
//
// The document is loaded and validated by kin-openapi once per test
// binary. Check validates one exchange: the reply's status must be
// documented for the operation, its Content-Type among the documented ones
// and its body must match the schema, with no field the schema does not
// list; when the server accepted the request (2xx) the request must match
// the document too. Transport wraps an http.RoundTripper so that every
// reply a test receives is checked, and Client is a checked client (Handler
// checks on the server's side, where the client is not the test's):
//
//	c := openapitest.Client(t)                 // or
//	hc := &http.Client{Transport: openapitest.Transport(t, tr)}
//
// Paths that are not in the document are not checked: the console's pages
// and assets, the demo's /play pages, /debug/pprof and the 404 of unknown
// routes; nor are replies marked Foreign, which a test makes up for
// something in front of the service. The replies of the live view (text/event-stream) are checked by
// status and headers; its events, where a test reads them, with
// CheckSchema("LiveView", data).
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/hongbao/hongbao/httpapi"
)

// spec is openapi.json loaded and checked by kin-openapi, with a router to
// find each request's operation.
type spec struct {
	doc    *openapi3.T
	router routers.Router
}

var loadSpec = sync.OnceValues(func() (*spec, error) {
	// The live view's body is a stream of text events; its events are
	// checked one by one with CheckSchema where the tests read them.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	// The draw log is JSON lines (docs/fairness.md); hongbao verify and
	// the tests check its lines.
	openapi3filter.RegisterBodyDecoder("application/jsonl", openapi3filter.PlainBodyDecoder)
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

// Doc is openapi.json as the checks use it: loaded, found valid, and with
// every object schema that lists its properties closed to others (see
// closeObjects). Callers must not change it.
func Doc() (*openapi3.T, error) {
	s, err := loadSpec()
	if err != nil {
		return nil, err
	}
	return s.doc, nil
}

// Foreign is the header a test's stand-in for something in front of the
// service (a gateway's 502, a proxy's page) puts on its reply: the reply
// is not the service's, so the document does not describe it and Check
// passes it. Stand-ins that imitate the service's own replies leave it
// off, and are checked like the service.
const Foreign = "Openapitest-Foreign"

// Check validates a reply to req against openapi.json. reqBody is the
// body req was sent with; req itself is not changed.
func Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	if header.Get(Foreign) != "" {
		return nil
	}
	route, params, err := s.router.FindRoute(req)
	var re *routers.RouteError
	if errors.As(err, &re) && (re.Reason == routers.ErrPathNotFound.Error() || re.Reason == routers.ErrMethodNotAllowed.Error()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("openapi: %s %s: %w", req.Method, req.URL.Path, err)
	}
	req = req.Clone(context.Background())
	req.Body = http.NoBody
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
			return fmt.Errorf("openapi: request %s %s (answered %d) does not match openapi.json: %w\nrequest body: %s",
				req.Method, req.URL.Path, status, err, excerpt(reqBody))
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Options: in.Options,
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("openapi: response %d to %s %s does not match openapi.json: %w\nbody: %s",
			status, req.Method, req.URL.Path, err, excerpt(body))
	}
	return nil
}

// CheckSchema validates a JSON value, such as one event of the live view,
// against the document's component schema name.
func CheckSchema(name string, data []byte) error {
	s, err := loadSpec()
	if err != nil {
		return err
	}
	ref := s.doc.Components.Schemas[name]
	if ref == nil {
		return fmt.Errorf("openapi.json has no schema %s", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("openapi: %s: %w", name, err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("openapi: %s does not match openapi.json: %w\nvalue: %s", name, err, excerpt(data))
	}
	return nil
}

func excerpt(b []byte) string {
	const most = 2000
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return strings.TrimSpace(string(b))
}

// Transport returns a RoundTripper that sends each request through next
// (http.DefaultTransport when nil) and checks the reply with Check,
// reporting a mismatch with tb.Errorf (safe from any goroutine, while the
// test runs). The reply's body is read and given back whole to the
// caller; a body that fails to read is given back as far as it came, with
// its error, unchecked. A live view's stream is checked by its status and
// headers and left to the caller unread.
func Transport(tb testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{tb: tb, next: next}
}

// Client is an HTTP client whose every reply is checked, over connections
// of its own that close when the test ends.
func Client(tb testing.TB) *http.Client {
	tr := &http.Transport{}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: Transport(tb, tr), Timeout: 30 * time.Second}
}

type transport struct {
	tb   testing.TB
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if IsRPC(req) {
		return t.next.RoundTrip(req)
	}
	sent, reqBody, err := keepBody(req)
	if err != nil {
		return nil, err
	}
	res, err := t.next.RoundTrip(sent)
	if err != nil {
		return res, err
	}
	if isStream(res.Header) {
		if err := Check(req, reqBody, res.StatusCode, res.Header, nil); err != nil {
			t.tb.Errorf("%v", err)
		}
		return res, nil
	}
	body, rerr := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if rerr != nil {
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failedReader{rerr}))
		return res, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err := Check(req, reqBody, res.StatusCode, res.Header, body); err != nil {
		t.tb.Errorf("%v", err)
	}
	return res, nil
}

// keepBody returns the request to send and a copy of its body. A request
// that can give its body again (GetBody, as http.NewRequest sets for
// in-memory bodies) is sent as it is; another one is sent as a copy with
// its body read into memory, since a RoundTripper must not change the
// request it was given.
func keepBody(req *http.Request) (*http.Request, []byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil, nil
	}
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			_ = req.Body.Close()
			return nil, nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			_ = req.Body.Close()
			return nil, nil, err
		}
		return req, b, nil
	}
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	sent := req.Clone(req.Context())
	sent.Body = io.NopCloser(bytes.NewReader(b))
	sent.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	sent.ContentLength = int64(len(b))
	return sent, b, nil
}

// IsRPC says whether req calls a Connect or gRPC procedure
// ("/hongbao.v1.GrabService/Grab", "/grpc.health.v1.Health/Check"): a
// path of two segments whose first names a package's service, in one of
// the protocols' content types. Those replies are not openapi.json's: the
// client's generated code decodes them against the proto (a mismatch
// fails the call), and a stream's body must not be read whole, so
// Transport passes them through.
func IsRPC(req *http.Request) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if !ok || !strings.Contains(service, ".") || method == "" || strings.Contains(method, "/") {
		return false
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	return strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+") ||
		ct == "application/proto" || ct == "application/json"
}

// isStream says whether a reply is the live view's event stream.
func isStream(h http.Header) bool {
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return ct == "text/event-stream"
}

// Handler checks every reply of next with Check, on the server's side,
// and hands each mismatch to report; for tests whose HTTP client is not
// theirs to wrap, such as the runnable examples, which show a client as a
// user makes one. The live view's stream is checked by its status and
// headers.
func Handler(next http.Handler, report func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.WriteHeader(http.StatusOK)
		}
		var body []byte
		if !isStream(rec.header) {
			body = rec.body.Bytes()
		}
		if err := Check(r, reqBody, rec.status, rec.header, body); err != nil {
			report(err)
		}
	})
}

// recorder passes a reply on and keeps its status, its headers as they
// were sent and its body.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status, r.header = status, r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !isStream(r.header) {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// Flush sends what was written, for the live view's stream.
func (r *recorder) Flush() { _ = http.NewResponseController(r.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the connection (Flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// failedReader gives back the error that cut a reply's body short.
type failedReader struct{ err error }

func (f failedReader) Read([]byte) (int, error) { return 0, f.err }

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
