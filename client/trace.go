package client

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// inject sends the caller's trace context (OpenTelemetry, W3C
// traceparent) with a request, so the service's spans join the caller's
// trace. A context without a span sends nothing.
func inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
