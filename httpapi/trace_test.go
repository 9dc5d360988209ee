package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// tracedServer is a test server whose engine and API record spans.
func tracedServer(t *testing.T, ecfg hongbao.Config) (*testServer, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("hongbao")
	rc := testenv.SharedRedis(t).Client
	ts := newTestServer(t, func(c *httpapi.Config) {
		ecfg.Redis, ecfg.Tracer = rc, tr
		eng, err := hongbao.New(ecfg)
		require.NoError(t, err)
		c.Engine, c.Tracer = eng, tr
	})
	return ts, rec, tr
}

// spansNamed are the ended spans called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestTraceGrab: a grab over HTTP with a traceparent yields a server span
// that is the caller's child, the grab's wait in the coalescer under it,
// and the batch script call under that with its size; the settlement of
// the grant yields a batch span with its ledger transaction.
func TestTraceGrab(t *testing.T) {
	t.Parallel()
	ts, rec, tr := tracedServer(t, hongbao.Config{})
	id := ts.create(t, `{"total_cents":300,"count":3}`)
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "tina"), "",
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	servers := spansNamed(rec, "POST /v1/campaigns/{id}/grab")
	require.Len(t, servers, 1)
	srv := servers[0]
	require.Equal(t, callerTrace, srv.SpanContext().TraceID().String())
	require.Equal(t, callerSpan, srv.Parent().SpanID().String(), "the caller's span is the parent")
	require.True(t, srv.Parent().IsRemote())
	require.Equal(t, trace.SpanKindServer, srv.SpanKind())
	require.EqualValues(t, 200, attr(srv, "http.response.status_code").AsInt64())
	require.Equal(t, "/v1/campaigns/{id}/grab", attr(srv, "http.route").AsString())

	waits := spansNamed(rec, "hongbao.coalesce.wait")
	require.Len(t, waits, 1)
	wait := waits[0]
	require.Equal(t, srv.SpanContext().SpanID(), wait.Parent().SpanID())
	require.Equal(t, id, attr(wait, "hongbao.campaign").AsString())
	require.Equal(t, "grab", attr(wait, "hongbao.op").AsString())

	batches := spansNamed(rec, "hongbao.batch")
	require.Len(t, batches, 1)
	batch := batches[0]
	require.Equal(t, callerTrace, batch.SpanContext().TraceID().String())
	require.Equal(t, wait.SpanContext().SpanID(), batch.Parent().SpanID())
	require.EqualValues(t, 1, attr(batch, "hongbao.batch.size").AsInt64())
	require.False(t, batch.StartTime().Before(wait.StartTime()))
	require.False(t, batch.EndTime().After(wait.EndTime()))

	// A grab without a traceparent starts a trace of its own.
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "uma"), "")
	require.Equal(t, http.StatusOK, r.Status)
	servers = spansNamed(rec, "POST /v1/campaigns/{id}/grab")
	require.Len(t, servers, 2)
	require.False(t, servers[1].Parent().IsValid())
	require.NotEqual(t, callerTrace, servers[1].SpanContext().TraceID().String())

	w, err := settle.New(settle.Config{Redis: ts.Redis.Client, Ledger: ts.Ledger, Consumer: "t", Logger: quiet(),
		Only: []string{id}, Tracer: tr})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = w.Pass(ctx)
	require.NoError(t, err)
	sb := spansNamed(rec, "hongbao.settle.batch")
	require.NotEmpty(t, sb)
	entries := int64(0)
	for _, s := range sb {
		require.Equal(t, id, attr(s, "hongbao.campaign").AsString())
		entries += attr(s, "hongbao.settle.entries").AsInt64()
	}
	require.EqualValues(t, 2, entries, "two grab batches, two entries")
	txs := spansNamed(rec, "ledger.apply_grants")
	require.Len(t, txs, len(sb))
	items := int64(0)
	for _, tx := range txs {
		require.Contains(t, spanIDs(sb), tx.Parent().SpanID(), "the transaction is inside a settlement batch")
		items += attr(tx, "hongbao.ledger.items").AsInt64()
	}
	require.EqualValues(t, 2, items)
}

// TestTraceGrabBatch: a batch over the gateway's route with a traceparent
// yields one server span, the caller's child, and under it one coalescer
// wait per user (each naming the campaign), whose script calls together
// carry every user of the batch.
func TestTraceGrabBatch(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("hongbao")
	rc := testenv.SharedRedis(t).Client
	ts := newTestServer(t, func(c *httpapi.Config) {
		eng, err := hongbao.New(hongbao.Config{Redis: rc, Tracer: tr})
		require.NoError(t, err)
		c.Engine, c.Tracer, c.GatewayKeys = eng, tr, [][]byte{gatewayKey}
	})
	id := ts.create(t, `{"total_cents":300,"count":3}`)
	users := []string{"ana", "ben", "cai", "dee", "eli"}
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(users),
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	servers := spansNamed(rec, "POST /v1/campaigns/{id}/grabs")
	require.Len(t, servers, 1)
	srv := servers[0]
	require.Equal(t, callerTrace, srv.SpanContext().TraceID().String())
	require.Equal(t, callerSpan, srv.Parent().SpanID().String(), "the caller's span is the parent")
	require.EqualValues(t, 200, attr(srv, "http.response.status_code").AsInt64())
	require.Equal(t, "/v1/campaigns/{id}/grabs", attr(srv, "http.route").AsString())

	waits := spansNamed(rec, "hongbao.coalesce.wait")
	require.Len(t, waits, len(users), "one wait per user of the batch")
	waitIDs := spanIDs(waits)
	for _, w := range waits {
		require.Equal(t, srv.SpanContext().SpanID(), w.Parent().SpanID())
		require.Equal(t, id, attr(w, "hongbao.campaign").AsString())
	}
	size := int64(0)
	for _, b := range spansNamed(rec, "hongbao.batch") {
		require.Equal(t, callerTrace, b.SpanContext().TraceID().String())
		require.Contains(t, waitIDs, b.Parent().SpanID(), "a script call is under one of the batch's waits")
		size += attr(b, "hongbao.batch.size").AsInt64()
	}
	require.EqualValues(t, len(users), size, "the script calls carried every user of the batch")
}

func spanIDs(ss []sdktrace.ReadOnlySpan) []trace.SpanID {
	var out []trace.SpanID
	for _, s := range ss {
		out = append(out, s.SpanContext().SpanID())
	}
	return out
}

// TestTraceWait: under WaitReplicas the batch's WAIT has its span, a
// child of the batch; with no replica it falls short, and the span and
// the request's say so.
func TestTraceWait(t *testing.T) {
	t.Parallel()
	ts, rec, _ := tracedServer(t, hongbao.Config{WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	id := ts.create(t, `{"total_cents":300,"count":3}`)
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "vic"), "",
		"traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.Equal(t, httpapi.CodeOutcomeUnknown, r.errorCode(t))

	waits := spansNamed(rec, "redis.wait")
	require.NotEmpty(t, waits)
	batch := spansNamed(rec, "hongbao.batch")
	require.Len(t, batch, 1)
	for _, w := range waits {
		require.Equal(t, batch[0].SpanContext().SpanID(), w.Parent().SpanID())
		require.EqualValues(t, 1, attr(w, "hongbao.wait.replicas").AsInt64())
		require.Equal(t, codes.Error, w.Status().Code, "a WAIT that fell short")
	}
	require.Equal(t, codes.Error, batch[0].Status().Code)
	srv := spansNamed(rec, "POST /v1/campaigns/{id}/grab")
	require.Len(t, srv, 1)
	require.Equal(t, codes.Error, srv[0].Status().Code)
	require.EqualValues(t, 503, attr(srv[0], "http.response.status_code").AsInt64())
}

// TestTraceReserve: a discount's reserve and confirm are traced as a
// grab is: each waits in the coalescer under its request, under the
// caller's trace, and its batch carries its size.
func TestTraceReserve(t *testing.T) {
	t.Parallel()
	ts, rec, _ := tracedServer(t, hongbao.Config{})
	r := ts.do(t, "POST", "/v1/discounts", string(adminKey), `{"budget_cents":1000,"quota":10}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.json(t)["id"].(string)
	parent := "00-" + callerTrace + "-" + callerSpan + "-01"
	r = ts.do(t, "POST", "/v1/discounts/"+id+"/reserve", string(paymentKey),
		`{"user_id":"xia","order_id":"o-1","order_amount_cents":5000}`, "traceparent", parent)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = ts.do(t, "POST", "/v1/discounts/"+id+"/orders/o-1/confirm", string(paymentKey), `{"user_id":"xia"}`, "traceparent", parent)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	ops := map[string]bool{}
	for _, w := range spansNamed(rec, "hongbao.coalesce.wait") {
		require.Equal(t, callerTrace, w.SpanContext().TraceID().String())
		ops[attr(w, "hongbao.op").AsString()] = true
	}
	require.Equal(t, map[string]bool{"reserve": true, "confirm": true}, ops)
	batches := spansNamed(rec, "hongbao.batch")
	require.Len(t, batches, 2)
	for _, b := range batches {
		require.Equal(t, callerTrace, b.SpanContext().TraceID().String())
		require.EqualValues(t, 1, attr(b, "hongbao.batch.size").AsInt64())
	}
}
