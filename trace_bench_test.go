package hongbao_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkGrabTracing: the grab path with tracing off (no tracer, the
// default), with the no-op tracer provider, and with the SDK recording
// every span (exported nowhere): what tracing costs the engine.
//
//	go test -run '^$' -bench GrabTracing -benchmem -count 5 .
func BenchmarkGrabTracing(b *testing.B) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = sdk.Shutdown(context.Background()) }()
	for _, tc := range []struct {
		name   string
		tracer trace.Tracer
	}{
		{"off", nil},
		{"noop", noop.NewTracerProvider().Tracer("hongbao")},
		{"sdk", sdk.Tracer("hongbao")},
	} {
		b.Run(tc.name, func(b *testing.B) { benchGrab(b, tc.tracer) })
	}
}
