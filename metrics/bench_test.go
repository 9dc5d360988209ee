package metrics_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/metrics"
)

// BenchmarkGrabWithMetrics is the root package's BenchmarkGrab with the
// engine's collector observing it: the metrics cost no allocation per
// grab (compare the allocs/op of both).
func BenchmarkGrabWithMetrics(b *testing.B) {
	r := testenv.SharedRedis(b)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	if err != nil {
		b.Fatal(err)
	}
	m := metrics.NewEngine(eng)
	defer m.Close()
	prometheus.NewRegistry().MustRegister(m)
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
}
