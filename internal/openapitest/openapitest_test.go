package openapitest_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestDocumentValid: kin-openapi loads openapi.json and finds it a valid
// OpenAPI 3 document.
func TestDocumentValid(t *testing.T) {
	t.Parallel()
	doc, err := openapitest.Doc()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."), doc.OpenAPI)
}

// TestCheckRefusesWrongReplies: the check fails a reply the document does
// not describe, and passes one it does.
func TestCheckRefusesWrongReplies(t *testing.T) {
	t.Parallel()
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	check := func(method, path string, status int, h http.Header, body string) error {
		req, err := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
		require.NoError(t, err)
		return openapitest.Check(req, nil, status, h, []byte(body))
	}
	grab := "/v1/campaigns/c1/grab"
	// What the document says.
	require.NoError(t, check("POST", grab, 200, jsonCT, `{"campaign":"c1","outcome":"sold_out"}`))
	require.NoError(t, check("POST", grab, 401, jsonCT, `{"error":{"code":"unauthorized","message":"no token"}}`))
	require.NoError(t, check("POST", grab, 502, http.Header{openapitest.Foreign: {"a gateway"}}, "bad gateway"), "not the service's reply: not checked")
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
	err = openapitest.Check(req, []byte(`{"count":"ten"}`), 201, jsonCT, []byte(`{}`))
	require.ErrorContains(t, err, "request POST /v1/campaigns")
	require.Empty(t, req.Header.Get("Content-Type"), "the caller's request is not changed")
}

// TestCheckSchema: a live view event is checked against LiveView.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, openapitest.CheckSchema("LiveView", []byte(`{"no_such_field":1}`)), "LiveView")
	require.ErrorContains(t, openapitest.CheckSchema("NoSuchSchema", []byte(`{}`)), "no schema")
}

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// TestTransportChecksEveryReply: a reply the document does not describe is
// reported naming its method, path, status and body, and the caller still
// gets the whole body; a good reply is not reported; the body a request
// was sent with is what the request check sees, whoever made it; a live
// view stream is checked by its headers and handed over unread.
func TestTransportChecksEveryReply(t *testing.T) {
	t.Parallel()
	stream := make(chan struct{})
	var got []string
	var mu sync.Mutex
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/campaigns/c1/grab":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, r.URL.Query().Get("reply"))
		case "/v1/campaigns":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{}`)
		case "/v1/campaigns/c1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			<-stream // the stream stays open: the transport must not wait for its end
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stream) })
	rec := &recorder{TB: t}
	c := &http.Client{Transport: openapitest.Transport(rec, nil)}
	t.Cleanup(c.CloseIdleConnections)

	good := `{"campaign":"c1","outcome":"sold_out"}`
	res, err := c.Post(hs.URL+"/v1/campaigns/c1/grab?reply="+good, "", nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, good, string(b))
	require.Empty(t, rec.reported())

	bad := `{"campaign":"c1","outcome":"stalled"}`
	res, err = c.Post(hs.URL+"/v1/campaigns/c1/grab?reply="+bad, "", nil)
	require.NoError(t, err)
	b, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, bad, string(b), "the caller gets the body whole")
	errs := rec.reported()
	require.Len(t, errs, 1)
	for _, want := range []string{"POST", "/v1/campaigns/c1/grab", "200", "stalled", "openapi.json"} {
		require.Contains(t, errs[0], want)
	}

	// A body without GetBody (a pipe, say) reaches the server and the check.
	res, err = c.Post(hs.URL+"/v1/campaigns", "application/json", io.MultiReader(strings.NewReader(`{"count":"ten"}`)))
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	mu.Lock()
	require.Equal(t, `{"count":"ten"}`, got[len(got)-1])
	mu.Unlock()
	errs = rec.reported()
	require.Len(t, errs, 2)
	require.Contains(t, errs[1], "request POST /v1/campaigns")

	// The live view: its 200 and Content-Type pass, its stream is the caller's.
	res, err = c.Get(hs.URL + "/v1/campaigns/c1/events")
	require.NoError(t, err)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: {}\n", line)
	_ = res.Body.Close()
	require.Len(t, rec.reported(), 2)

	// Not in the document: not checked.
	res, err = c.Get(hs.URL + "/console/")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Len(t, rec.reported(), 2)
}

// TestHandlerChecksEveryReply: on the server's side, a reply the document
// does not describe is reported and still sent; a good one is not.
func TestHandlerChecksEveryReply(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reported []error
	hs := httptest.NewServer(openapitest.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, r.URL.Query().Get("reply"))
	}), func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	t.Cleanup(hs.Close)
	for _, reply := range []string{`{"campaign":"c1","outcome":"sold_out"}`, `{"campaign":"c1","outcome":"stalled"}`} {
		res, err := hs.Client().Post(hs.URL+"/v1/campaigns/c1/grab?reply="+reply, "", nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		require.Equal(t, reply, string(b))
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1)
	require.ErrorContains(t, reported[0], "response 200 to POST /v1/campaigns/c1/grab does not match openapi.json")
	require.ErrorContains(t, reported[0], "stalled")
}

// TestIsRPC: a Connect or gRPC procedure's call passes the transport
// unchecked (its client decodes the reply against the proto); the JSON
// routes, whatever their content type, do not.
func TestIsRPC(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, contentType string
		rpc               bool
	}{
		{"/hongbao.v1.GrabService/Grab", "application/proto", true},
		{"/hongbao.v1.GrabService/Grab", "application/json", true},
		{"/hongbao.v1.GrabService/GrabStream", "application/connect+proto", true},
		{"/grpc.health.v1.Health/Check", "application/grpc", true},
		{"/grpc.health.v1.Health/Check", "application/grpc+proto", true},
		{"/v1/campaigns/c1/grab", "application/json", false},
		{"/v1/campaigns", "application/json", false},
		{"/hongbao.v1.GrabService/Grab", "text/plain", false},
		{"/hongbao.v1.GrabService/Grab/x", "application/proto", false},
		{"/openapi.json", "application/json", false},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://h"+c.path, nil)
		require.NoError(t, err)
		req.Header.Set("Content-Type", c.contentType)
		require.Equal(t, c.rpc, openapitest.IsRPC(req), "%s %s", c.path, c.contentType)
	}
}
