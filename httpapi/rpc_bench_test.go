package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// BenchmarkConnectGrab compares, on the same server, Redis and engine in
// the same run, the single grab over its JSON route with the unary Grab
// procedure over Connect (the same HTTP/1.1 client) and over gRPC (h2c,
// one connection multiplexed). One op is one user granted a packet, 64
// grabs in flight; the tokens are minted before the clock starts.
//
//	go test -run '^$' -bench ConnectGrab -benchtime 20000x ./httpapi/
func BenchmarkConnectGrab(b *testing.B) {
	const inFlight = 64
	ts := newGatewayServer(b, false)
	// A plain client, as BenchmarkGrabBatch's: the checks of
	// openapitest's transport would spend the cores the server is
	// measured on.
	tr := &http.Transport{MaxIdleConnsPerHost: inFlight}
	b.Cleanup(tr.CloseIdleConnections)
	h1 := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	b.Cleanup(h2.CloseIdleConnections)
	ts.Client = h1
	connectGrabs := hongbaov1connect.NewGrabServiceClient(h1, ts.URL)
	grpcGrabs := hongbaov1connect.NewGrabServiceClient(&http.Client{Transport: h2, Timeout: 30 * time.Second}, ts.URL, connect.WithGRPC())
	rpc := func(c hongbaov1connect.GrabServiceClient) func(id, tok string) error {
		return func(id, tok string) error {
			req := connect.NewRequest(&hongbaov1.GrabRequest{CampaignId: id})
			req.Header().Set("Authorization", "Bearer "+tok)
			res, err := c.Grab(context.Background(), req)
			if err == nil && res.Msg.Outcome != hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED {
				err = fmt.Errorf("outcome %v", res.Msg.Outcome)
			}
			return err
		}
	}
	for _, c := range []struct {
		name string
		grab func(id, tok string) error
	}{
		{"json", func(id, tok string) error {
			r, err := ts.try("POST", "/v1/campaigns/"+id+"/grab", tok, "")
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("%d %s", r.Status, r.Body)
			}
			return err
		}},
		{"connect", rpc(connectGrabs)},
		{"grpc", rpc(grpcGrabs)},
	} {
		b.Run(c.name, func(b *testing.B) {
			id := ts.create(b, fmt.Sprintf(`{"total":"%d.00","count":%d}`, b.N, b.N))
			toks := make([]string, b.N)
			for i := range toks {
				toks[i] = token(b, fmt.Sprintf("%s-%d", c.name, i))
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < inFlight; w++ {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if err := c.grab(id, toks[i]); err != nil {
							b.Errorf("grab %d: %v", i, err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "grants/s")
		})
	}
}
