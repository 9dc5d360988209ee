package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// BenchmarkGrabJSON compares, in the same run, the single-grab JSON route
// (a fresh user token every request, as on a user's first tap; the
// per-user limit on) with a trivial net/http handler answering a fixed
// body of a grab reply's size, both over loopback with the same plain
// client and 64 requests in flight. One op is one request; req/s is the
// figure to compare.
//
//	go test -run '^$' -bench GrabJSON -benchtime 2s ./httpapi/
func BenchmarkGrabJSON(b *testing.B) {
	const inFlight = 64
	ts := newTestServer(b, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: inFlight}
	b.Cleanup(tr.CloseIdleConnections)
	ts.Client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body := []byte(`{"campaign":"trivial","outcome":"already_granted","packet_id":"trivial/1","amount":"1.00","amount_cents":100}` + "\n")
	trivial := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(trivial.Close)
	run := func(b *testing.B, url string, toks []string) {
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < inFlight; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					req, _ := http.NewRequest("POST", url, nil)
					req.Header.Set("Authorization", "Bearer "+toks[i])
					res, err := ts.Client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("request %d: status %d", i, res.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	}
	mint := func(b *testing.B, prefix string) []string {
		toks := make([]string, b.N)
		for i := range toks {
			toks[i] = token(b, fmt.Sprintf("%s-%d", prefix, i))
		}
		return toks
	}
	b.Run("trivial", func(b *testing.B) { run(b, trivial.URL, mint(b, "t")) })
	b.Run("grab", func(b *testing.B) {
		id := ts.create(b, fmt.Sprintf(`{"total":"%d.00","count":%d}`, b.N, b.N))
		run(b, ts.URL+"/v1/campaigns/"+id+"/grab", mint(b, "g"))
	})
}
