package hongbao_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// BenchmarkGrab measures coalesced grabs on the shared test Redis (no
// persistence), one distinct user per grab, 64 goroutines per CPU. The
// bench command (hongbao bench) is the fuller measurement.
func BenchmarkGrab(b *testing.B) { benchGrab(b, nil) }

// BenchmarkGrabObserved is BenchmarkGrab with an observer of every grab
// and batch (as package metrics is one): it costs two clock reads and a
// call per grab, and no allocation.
func BenchmarkGrabObserved(b *testing.B) { benchGrab(b, nil, &countingObserver{}) }

// countingObserver counts the grabs and batches it hears.
type countingObserver struct {
	hongbao.NopObserver
	grabs, batches atomic.Int64
}

func (o *countingObserver) ObserveGrab(hongbao.GrabEvent)   { o.grabs.Add(1) }
func (o *countingObserver) ObserveBatch(hongbao.BatchEvent) { o.batches.Add(1) }

// benchGrab grabs a packet for a new user in each iteration, from 64
// goroutines per core, with tracer tr (nil: tracing off) and observers
// obs.
func benchGrab(b *testing.B, tr trace.Tracer, obs ...hongbao.Observer) {
	r := testenv.SharedRedis(b)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Tracer: tr, Observers: obs})
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
	st := eng.Stats()
	b.ReportMetric(float64(st.Grabs)/float64(max(st.Batches, 1)), "grabs/batch")
}
