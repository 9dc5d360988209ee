package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkGrabBatch compares, on the same Redis and engine in the same
// run, the grants a second of the engine called directly by 1600
// goroutines (--mode engine's shape) with those of the batch route over
// HTTP, 100 users a request and 16 requests in flight. One op is one
// user granted a packet; grants/s is the figure to compare.
//
//	go test -run '^$' -bench GrabBatch -benchtime 100000x ./httpapi/
func BenchmarkGrabBatch(b *testing.B) {
	const perRequest, inFlight = 100, 16
	ts := newGatewayServer(b, false)
	// A plain client: the checks of openapitest's transport would spend
	// the cores the server is measured on.
	tr := &http.Transport{MaxIdleConnsPerHost: inFlight}
	b.Cleanup(tr.CloseIdleConnections)
	ts.Client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	newCampaign := func(b *testing.B) string {
		b.Helper()
		return ts.create(b, fmt.Sprintf(`{"total":"%d.00","count":%d}`, b.N, b.N))
	}
	b.Run("engine", func(b *testing.B) {
		id := newCampaign(b)
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < perRequest*inFlight; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					g, err := ts.Engine.Grab(context.Background(), id, fmt.Sprintf("e-%d", i))
					if err != nil || !g.Outcome.HasPacket() {
						b.Errorf("grab %d: %v %v", i, g.Outcome, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
	})
	b.Run("batch-route", func(b *testing.B) {
		id := newCampaign(b)
		batches := (b.N + perRequest - 1) / perRequest
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < inFlight; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := int(next.Add(1) - 1)
					if k >= batches {
						return
					}
					users := make([]string, 0, perRequest)
					for i := k * perRequest; i < min((k+1)*perRequest, b.N); i++ {
						users = append(users, fmt.Sprintf("h-%d", i))
					}
					r, err := ts.try("POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(users))
					if err != nil || r.Status != http.StatusOK {
						b.Errorf("batch %d: %v %d %s", k, err, r.Status, r.Body)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
	})
}
