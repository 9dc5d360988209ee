package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
	"github.com/hongbao/hongbao/internal/redisserver"
)

func TestBenchHTTP(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args()...)
	code, out, errs := run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--users", "600", "--packets", "400", "--clicks", "2", "--concurrency", "16", "--json")
	require.Equal(t, 0, code, errs)
	var rep bench.HTTPReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	s := rep.Serve
	require.EqualValues(t, 1200, s.Requests)
	require.EqualValues(t, 400, s.Outcomes["granted"])
	require.EqualValues(t, 1200, s.Outcomes["granted"]+s.Outcomes["already_granted"]+s.Outcomes["sold_out"])
	require.EqualValues(t, 1200, s.Statuses["200"])
	require.Positive(t, s.PerSec)
	require.NotNil(t, rep.Trivial)
	require.EqualValues(t, 1200, rep.Trivial.Requests)
	require.Positive(t, rep.Ratio)

	// The trivial handler of another process, given by its URL: this one
	// counts what reaches it.
	var hits atomic.Int64
	triv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		bench.TrivialHandler().ServeHTTP(w, r)
	}))
	defer triv.Close()
	code, out, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--users", "50", "--packets", "10", "--concurrency", "4", "--trivial-url", triv.URL, "--json")
	require.Equal(t, 0, code, errs)
	rep = bench.HTTPReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.Trivial)
	require.EqualValues(t, 50, rep.Trivial.Requests)
	require.EqualValues(t, 50, hits.Load(), "measured at --trivial-url")

	code, _, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL)
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--token-secret-file")
	tokFile := filepath.Join(fx.dir, "tokens")
	code, out, errs = run(t, nil, "bench", "--mode=http", "--token-secret-file", fx.secretFile, "--users", "5", "--tokens-out", tokFile)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "5 tokens")
}

// TestBenchHTTPBatch: bench --mode http --batch sends the grabs to the
// gateway's batch route, under a gateway key, and counts each user's
// outcome.
func TestBenchHTTPBatch(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gw := writeSecret(t, fx.dir, "gateway.key")
	p := startServe(t, fx.args("--gateway-key-file", gw, "--user-rate", "-1")...)
	code, out, errs := run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--admin-key-file", fx.adminFile,
		"--gateway-key-file", gw, "--batch", "100", "--users", "1000", "--packets", "400", "--clicks", "2", "--concurrency", "4", "--json")
	require.Equal(t, 0, code, errs)
	var rep bench.HTTPReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	s := rep.Serve
	require.EqualValues(t, 20, s.Requests)
	require.EqualValues(t, 20, s.Statuses["200"])
	require.EqualValues(t, 400, s.Outcomes["granted"])
	require.EqualValues(t, 2000, s.Outcomes["granted"]+s.Outcomes["already_granted"]+s.Outcomes["sold_out"])
	require.Positive(t, s.GrantsSec)
	require.Nil(t, rep.Trivial)
}
