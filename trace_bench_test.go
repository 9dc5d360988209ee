package hongbao_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
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

func benchGrab(b *testing.B, tr trace.Tracer) {
	r := testenv.SharedRedis(b)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Tracer: tr})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(b), Total: int64(b.N+1) * 100, Count: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g, err := eng.Grab(ctx, c.ID, "u"+strconv.FormatInt(next.Add(1), 10))
			if err != nil || g.Outcome != hongbao.Granted {
				b.Errorf("grab: %v %v", g.Outcome, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grants/s")
}
