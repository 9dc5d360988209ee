package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// collector is an OTLP/HTTP trace receiver: it keeps the spans' names by
// trace id.
type collector struct {
	mu     sync.Mutex
	traces map[string][]string
	bad    int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		c.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				id := trace.TraceID(s.TraceId).String()
				c.traces[id] = append(c.traces[id], s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestServeTraces: serve --otlp-endpoint exports the spans of a grab made
// through the client in the caller's trace; they are flushed at shutdown.
func TestServeTraces(t *testing.T) {
	t.Parallel()
	col := &collector{traces: map[string][]string{}}
	hs := httptest.NewServer(col)
	defer hs.Close()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--otlp-endpoint", hs.URL)...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total_cents":300,"count":3}`)

	c, err := client.New(p.URL, client.Options{Token: api.userToken(t, "wes"), HTTPClient: api.c,
		Propagate: func(ctx context.Context, h http.Header) {
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
		}})
	require.NoError(t, err)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	g, err := c.Grab(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.Granted, g.Outcome)
	p.stop(t)

	col.mu.Lock()
	defer col.mu.Unlock()
	require.Zero(t, col.bad)
	require.ElementsMatch(t, []string{"POST /v1/campaigns/{id}/grab", "hongbao.coalesce.wait", "hongbao.batch"},
		col.traces[tid.String()], "the grab's spans, in the caller's trace")
}

// An --otlp-endpoint that is not an http(s) URL is a usage error.
func TestServeTracesBadEndpoint(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	code, _, errs := run(t, nil, append([]string{"serve"}, fx.args("--otlp-endpoint", "ftp://collector")...)...)
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--otlp-endpoint")
}

// TestSettleTraces: settle --otlp-endpoint exports a span per settlement
// batch, each with its ledger transaction inside it.
func TestSettleTraces(t *testing.T) {
	t.Parallel()
	col := &collector{traces: map[string][]string{}}
	hs := httptest.NewServer(col)
	defer hs.Close()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--settle=false", "--packets", "100", "--users", "60", "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	code, _, errs = run(t, nil, "settle", "--redis", r.Addr, "--ledger", dsn, "--campaigns", rep.Campaign,
		"--consumer", "trace-test", "--drain", "--otlp-endpoint", hs.URL)
	require.Equal(t, 0, code, errs)

	col.mu.Lock()
	defer col.mu.Unlock()
	require.Zero(t, col.bad)
	batches, txs := 0, 0
	for _, names := range col.traces {
		for _, n := range names {
			switch n {
			case "hongbao.settle.batch":
				batches++
			case "ledger.apply_grants":
				txs++
			}
		}
	}
	require.Positive(t, batches)
	require.Equal(t, batches, txs, "one ledger transaction per batch")
}
