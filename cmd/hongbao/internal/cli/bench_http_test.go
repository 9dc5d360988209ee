package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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

// TestBenchHTTPRounds: --rounds alternates serve with the trivial handler,
// each round on a campaign of its own, and reports every round's ratio and
// their median; --serve-pid reads the serve's CPU around its measurements
// (this process's, where the test runs serve).
func TestBenchHTTPRounds(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1")...)
	code, out, errs := run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--users", "300", "--packets", "200", "--concurrency", "8", "--rounds", "3",
		"--serve-pid", strconv.Itoa(os.Getpid()), "--json")
	require.Equal(t, 0, code, errs)
	var rep bench.HTTPReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Rounds, 3)
	var ratios []float64
	campaigns := map[string]bool{}
	for i, r := range rep.Rounds {
		require.Equal(t, []string{"serve", "trivial", "serve"}[i], r.First)
		require.Positive(t, r.ServePerSec)
		require.Positive(t, r.TrivialPerSec)
		require.InDelta(t, r.ServePerSec/r.TrivialPerSec, r.Ratio, 0.001)
		ratios = append(ratios, r.Ratio)
		campaigns[r.Campaign] = true
	}
	require.Len(t, campaigns, 3, "a campaign of its own each round")
	sort.Float64s(ratios)
	require.Equal(t, ratios[1], rep.Ratio, "the median round's ratio")
	s := rep.Serve
	// Each round's campaign is fresh: 300 users, 200 packets, one grab each.
	require.EqualValues(t, 300, s.Requests)
	require.EqualValues(t, 200, s.Outcomes["granted"])
	require.EqualValues(t, 100, s.Outcomes["sold_out"])
	require.EqualValues(t, 300, rep.Trivial.Requests)
	require.Positive(t, s.CPUSeconds)
	require.InDelta(t, s.CPUSeconds*1e6/300, s.CPUUsPerRequest, 0.01)
	require.Equal(t, s.CPUUsPerRequest, s.CPUUsPerUser)

	// The text report names every round and the median.
	code, out, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--users", "20", "--packets", "10", "--concurrency", "2", "--rounds", "2")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "round 2 (trivial first)")
	require.Contains(t, out, "(median of 2 rounds)")

	code, _, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--engine-redis", fx.redisURL())
	require.Equal(t, 2, code)
	require.Contains(t, errs, "beside batches only")
}

// TestBenchHTTPBatchEngine: --batch with --engine-redis measures serve's
// batches and the engine on the serve's Redis in every round, alternating,
// and reports their ratio; the counts of both add up.
func TestBenchHTTPBatchEngine(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gw := writeSecret(t, fx.dir, "gateway.key")
	p := startServe(t, fx.args("--gateway-key-file", gw, "--user-rate", "-1")...)
	code, out, errs := run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--admin-key-file", fx.adminFile,
		"--gateway-key-file", gw, "--batch", "50", "--users", "500", "--packets", "400", "--concurrency", "2",
		"--rounds", "2", "--engine-redis", fx.redisURL(), "--json")
	require.Equal(t, 0, code, errs)
	var rep bench.HTTPReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Rounds, 2)
	require.Equal(t, "serve", rep.Rounds[0].First)
	require.Equal(t, "engine", rep.Rounds[1].First)
	for _, r := range rep.Rounds {
		require.Positive(t, r.ServeGrantsSec)
		require.Positive(t, r.EngineGrantsSec)
		require.InDelta(t, r.ServeGrantsSec/r.EngineGrantsSec, r.EngineRatio, 0.001)
		require.Zero(t, r.Ratio)
	}
	require.Contains(t, []float64{rep.Rounds[0].EngineRatio, rep.Rounds[1].EngineRatio}, rep.EngineRatio)
	s := rep.Serve
	require.EqualValues(t, 10, s.Requests)
	require.EqualValues(t, 400, s.Outcomes["granted"])
	require.EqualValues(t, 500, s.Outcomes["granted"]+s.Outcomes["sold_out"])
	e := rep.Engine
	require.NotNil(t, e)
	require.True(t, e.OK, e.Problems)
	require.Equal(t, "given", e.Redis)
	require.Equal(t, 100, e.Concurrency, "--batch x --concurrency goroutines")
	require.EqualValues(t, 500, e.Grabs)
	require.EqualValues(t, 400, e.Granted)
	require.EqualValues(t, 100, e.SoldOut)
	require.Nil(t, rep.Trivial)
}

// TestBenchHTTPStream: --stream measures the gateway's GrabStream beside
// the batch route and the engine in every round, the three in turn, each
// of serve's on a campaign of its own, and reports every ratio and their
// medians; every grab of the streams is answered once and the counts add
// up.
func TestBenchHTTPStream(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gw := writeSecret(t, fx.dir, "gateway.key")
	p := startServe(t, fx.args("--gateway-key-file", gw, "--user-rate", "-1")...)
	code, out, errs := run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--admin-key-file", fx.adminFile,
		"--gateway-key-file", gw, "--batch", "50", "--users", "500", "--packets", "400", "--concurrency", "2",
		"--stream", "--streams", "3", "--window", "100", "--rounds", "3", "--engine-redis", fx.redisURL(), "--json")
	require.Equal(t, 0, code, errs)
	var rep bench.HTTPReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Rounds, 3)
	campaigns := map[string]bool{}
	var streamRatios, batchRatios, engineRatios []float64
	for i, r := range rep.Rounds {
		require.Equal(t, []string{"stream,batch,engine", "batch,engine,stream", "engine,stream,batch"}[i], r.Order)
		require.Equal(t, []string{"stream", "batch", "engine"}[i], r.First)
		require.Positive(t, r.StreamGrantsSec)
		require.Positive(t, r.ServeGrantsSec)
		require.Positive(t, r.EngineGrantsSec)
		require.InDelta(t, r.StreamGrantsSec/r.EngineGrantsSec, r.StreamRatio, 0.001)
		require.InDelta(t, r.StreamGrantsSec/r.ServeGrantsSec, r.StreamBatchRatio, 0.001)
		require.InDelta(t, r.ServeGrantsSec/r.EngineGrantsSec, r.EngineRatio, 0.001)
		campaigns[r.Campaign], campaigns[r.StreamCampaign] = true, true
		streamRatios, batchRatios = append(streamRatios, r.StreamRatio), append(batchRatios, r.StreamBatchRatio)
		engineRatios = append(engineRatios, r.EngineRatio)
	}
	require.Len(t, campaigns, 6, "a campaign of its own for each of serve's measurements")
	for _, c := range []struct {
		all []float64
		got float64
	}{{streamRatios, rep.StreamRatio}, {batchRatios, rep.StreamBatchRatio}, {engineRatios, rep.EngineRatio}} {
		sort.Float64s(c.all)
		require.Equal(t, c.all[1], c.got, "the median of the rounds")
	}
	st := rep.Stream
	require.NotNil(t, st)
	require.Equal(t, "stream", st.Target)
	require.Equal(t, 3, st.Concurrency)
	require.EqualValues(t, 10, st.Requests, "500 grabs, 50 a message")
	require.EqualValues(t, map[string]int64{"ok": 3}, st.Statuses)
	require.EqualValues(t, map[string]int64{"granted": 400, "sold_out": 100}, st.Outcomes)
	require.Zero(t, st.Errors)
	s := rep.Serve
	require.EqualValues(t, 10, s.Requests)
	require.EqualValues(t, map[string]int64{"granted": 400, "sold_out": 100}, s.Outcomes)
	e := rep.Engine
	require.NotNil(t, e)
	require.True(t, e.OK, e.Problems)
	require.EqualValues(t, 400, e.Granted)
	require.NotEqual(t, st.Campaign, s.Campaign)

	// Two clicks a user on a stream: each user's second grab is answered
	// already_granted or sold_out; the text report names the ratios.
	code, out, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--admin-key-file", fx.adminFile,
		"--gateway-key-file", gw, "--batch", "40", "--users", "200", "--clicks", "2", "--packets", "150",
		"--concurrency", "2", "--stream", "--rounds", "2")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "stream   10 messages of 40 grabs")
	require.Contains(t, out, "outcomes: already_granted 150, granted 150, sold_out 100; streams ended: ok 2")
	require.Contains(t, out, "round 2 (batch first)")
	require.Contains(t, out, "serve stream / batches:")

	code, _, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--admin-key-file", fx.adminFile,
		"--gateway-key-file", gw, "--batch", "50", "--window", "20", "--stream")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "at least batch grabs")
	code, _, errs = run(t, nil, "bench", "--mode", "http", "--url", p.URL, "--token-secret-file", fx.secretFile,
		"--admin-key-file", fx.adminFile, "--stream")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "beside batches only")
}
