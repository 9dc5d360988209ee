package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdempotencyKeyRace: the same create, with the same Idempotency-Key,
// sent at once to two replicas of the service, several times each, as a
// client retrying on a timeout would: exactly one answers 201 Created, and
// every other answers 200 with the same campaign (its id and seed), a
// replay, never an error to retry; red packets on one shard and four, and
// discounts.
func TestIdempotencyKeyRace(t *testing.T) {
	t.Parallel()
	replicas := []*testServer{newTestServer(t, nil), newTestServer(t, nil)}
	for _, tc := range []struct{ name, path, body string }{
		{"packets", "/v1/campaigns", `{"total":"50.00","count":500}`},
		{"packets-sharded", "/v1/campaigns", `{"total":"50.00","count":500,"shards":4}`},
		{"discount", "/v1/discounts", `{"budget":"50.00","quota":500,"shards":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := fmt.Sprintf("race-%s-%d", tc.name, time.Now().UnixNano())
			const n = 8
			replies := make([]reply, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					replies[i], errs[i] = replicas[i%2].try("POST", tc.path, string(adminKey), tc.body, "Idempotency-Key", key)
				}()
			}
			close(start)
			wg.Wait()
			created := 0
			var id, seed any
			for i, r := range replies {
				require.NoError(t, errs[i])
				require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.Status, "%s", r.Body)
				if r.Status == http.StatusCreated {
					created++
				}
				got := r.json(t)
				if id == nil {
					id, seed = got["id"], got["seed"]
				}
				require.Equal(t, id, got["id"])
				require.Equal(t, seed, got["seed"])
			}
			require.Equal(t, 1, created, "exactly one create, the others replays")
		})
	}
}
