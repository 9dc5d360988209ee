package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/client/token"
)

// HTTPOptions configure a benchmark of a running serve over HTTP.
type HTTPOptions struct {
	// URL is the serve's base URL, e.g. http://127.0.0.1:8080. Required.
	URL string
	// Secret signs the users' tokens (pre-minted before the clock starts).
	// Required.
	Secret token.Secret
	// AdminKey creates the campaign. Required unless Campaign is set.
	AdminKey string
	// Campaign grabs from an existing campaign instead of creating one.
	Campaign string
	// Packets and Total (cents) make the campaign when one is created.
	Packets int
	Total   int64
	// Users is how many distinct users grab; Clicks how many grabs each
	// sends (one after the other). Default 1 click.
	Users  int
	Clicks int
	// Concurrency is the requests in flight at once (one connection each).
	Concurrency int
	// Trivial, if set, also measures a trivial Go handler on a loopback
	// listener of this process with the same client, for comparison.
	Trivial bool
	// TrivialURL, if set, is a trivial handler already running in a
	// process of its own ('hongbao bench --mode http --trivial-listen'),
	// measured instead of one in this process: serve runs in a process of
	// its own too, so the two are then measured alike.
	TrivialURL string
	// Batch, if positive, sends the grabs as a platform's gateway does:
	// Batch users a request to POST /v1/campaigns/{id}/grabs, under
	// GatewayKey (or AdminKey, which opens that route too), Concurrency
	// requests in flight; no tokens are minted and no trivial handler is
	// measured. Default 0: one grab a request, under each user's token.
	Batch int
	// GatewayKey is a gateway key of the serve, for Batch.
	GatewayKey string
	// Rounds is how many times the pair of measurements (serve and the
	// trivial handler, or serve's batches and the engine) runs, alternating
	// which goes first; each round grabs from a campaign of its own when
	// the campaign is created here. The ratios reported are the median of
	// the rounds'. Default 1.
	Rounds int
	// EngineRedisURL, with Batch, also measures hongbao's Engine in this
	// process on that Redis (the serve's own) in every round: Batch x
	// Concurrency goroutines (the users the batches hold at once) grab
	// once each for Users users from a campaign of Packets packets and
	// Total, as 'hongbao bench --mode engine --redis' does.
	EngineRedisURL string
	// ServePID, if positive, is the serve's process id: its CPU time
	// (user + system, from /proc/PID/stat) is read around each of its
	// measurements, so that the report gives serve's CPU per request.
	ServePID int
	// Stream, with Batch, also measures serve's GrabStream (gRPC over h2c)
	// in every round, beside the batch route (and the engine, with
	// EngineRedisURL), on a campaign of its own: Streams streams, a
	// connection each, send the same grabs, Batch a message, each keeping
	// at most Window grabs in flight and reading results as they come.
	Stream  bool
	Streams int
	Window  int
	// Progress, if not nil, starts a progress bar.
	Progress func(label string, total int64) Progress
}

// HTTPResult is what one HTTP measurement saw.
type HTTPResult struct {
	Target      string           `json:"target"` // "serve" or "trivial"
	Campaign    string           `json:"campaign,omitempty"`
	Users       int              `json:"users"`
	Requests    int64            `json:"requests"`
	Concurrency int              `json:"concurrency"`
	Seconds     float64          `json:"seconds"`
	PerSec      float64          `json:"requests_per_sec"`
	GrantsSec   float64          `json:"granted_per_sec,omitempty"`
	P50ms       float64          `json:"p50_ms"`
	P90ms       float64          `json:"p90_ms"`
	P99ms       float64          `json:"p99_ms"`
	MaxMs       float64          `json:"max_ms"`
	Outcomes    map[string]int64 `json:"outcomes"`
	Statuses    map[string]int64 `json:"statuses"`
	Errors      int64            `json:"transport_errors"`
	// CPUSeconds is the measured process's CPU time (user + system) during
	// the measurement, when known (serve with ServePID); CPUUsPerRequest
	// and CPUUsPerUser divide it by the requests and by the users' grabs
	// they carried (the same for single grabs).
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	CPUUsPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	CPUUsPerUser    float64 `json:"cpu_us_per_user,omitempty"`
}

// HTTPRound is one round of a paired measurement.
type HTTPRound struct {
	// First is what ran first in the round: "serve", "trivial" or
	// "engine".
	First string `json:"first"`
	// Campaign is the campaign serve grabbed from.
	Campaign string `json:"campaign"`
	// ServePerSec is serve's requests/s; ServeGrantsSec its users granted
	// a second.
	ServePerSec    float64 `json:"serve_requests_per_sec"`
	ServeGrantsSec float64 `json:"serve_granted_per_sec,omitempty"`
	// TrivialPerSec and Ratio (ServePerSec over it) with single grabs.
	TrivialPerSec float64 `json:"trivial_requests_per_sec,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	// EngineGrantsSec and EngineRatio (ServeGrantsSec over it) with
	// batches and an engine Redis.
	EngineGrantsSec  float64 `json:"engine_grants_per_sec,omitempty"`
	EngineRatio      float64 `json:"engine_ratio,omitempty"`
	ServeCPUUsPerReq float64 `json:"serve_cpu_us_per_request,omitempty"`
	// With Stream: Order is the round's measurements in the order they
	// ran ("stream,batch,engine" and its rotations); StreamCampaign the
	// stream's campaign; StreamGrantsSec its users granted a second;
	// StreamRatio that over the engine's grants/s, StreamBatchRatio over
	// the batch route's users granted a second; the CPU figures serve's
	// per user carried, stream and batch route.
	Order              string  `json:"order,omitempty"`
	StreamCampaign     string  `json:"stream_campaign,omitempty"`
	StreamGrantsSec    float64 `json:"stream_granted_per_sec,omitempty"`
	StreamRatio        float64 `json:"stream_engine_ratio,omitempty"`
	StreamBatchRatio   float64 `json:"stream_batch_ratio,omitempty"`
	StreamCPUUsPerUser float64 `json:"stream_cpu_us_per_user,omitempty"`
	ServeCPUUsPerUser  float64 `json:"serve_cpu_us_per_user,omitempty"`
}

// HTTPReport holds the serve measurement and, when asked, the trivial
// handler's or the engine's, measured in the same run. With several rounds
// Serve, Trivial and Engine are those of the round with the median ratio.
type HTTPReport struct {
	Serve   *HTTPResult `json:"serve"`
	Trivial *HTTPResult `json:"trivial,omitempty"`
	// Ratio is serve requests/s over the trivial handler's (the median of
	// the rounds').
	Ratio float64 `json:"ratio,omitempty"`
	// Engine is the engine's measurement on the serve's Redis (with
	// EngineRedisURL); EngineRatio serve's users granted a second over the
	// engine's grants/s (the median of the rounds').
	Engine      *Result `json:"engine,omitempty"`
	EngineRatio float64 `json:"engine_ratio,omitempty"`
	// Stream is serve's GrabStream measurement (with Stream);
	// StreamRatio its users granted a second over the engine's grants/s,
	// StreamBatchRatio over the batch route's (each the median of the
	// rounds'). With Stream, Serve, Stream and Engine are those of the
	// round of the median StreamRatio (StreamBatchRatio without an
	// engine).
	Stream           *HTTPResult `json:"stream,omitempty"`
	StreamRatio      float64     `json:"stream_engine_ratio,omitempty"`
	StreamBatchRatio float64     `json:"stream_batch_ratio,omitempty"`
	// Rounds are every round's figures, in order.
	Rounds []HTTPRound `json:"rounds"`
}

// Validate checks the options.
func (o *HTTPOptions) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("the serve URL is required")
	case o.Batch == 0 && len(o.Secret.Key) < token.MinSecretLen:
		return fmt.Errorf("the token secret must be at least %d bytes", token.MinSecretLen)
	case o.Campaign == "" && o.AdminKey == "":
		return errors.New("an admin key (to create the campaign) or a campaign id is required")
	case o.Users < 1 || o.Concurrency < 1:
		return errors.New("users and concurrency must be at least 1")
	case o.Campaign == "" && (o.Packets < 1 || o.Total < int64(o.Packets)):
		return errors.New("packets must be at least 1 and the total at least a cent a packet")
	case o.Clicks < 0 || o.Clicks > 100:
		return errors.New("clicks must be within 1..100")
	case o.Batch < 0 || o.Batch > 1000:
		return errors.New("batch must be within 0..1000")
	case o.Batch > 0 && o.GatewayKey == "" && o.AdminKey == "":
		return errors.New("batches need a gateway key or an admin key")
	case o.Rounds < 0 || o.Rounds > 100:
		return errors.New("rounds must be within 1..100")
	case o.EngineRedisURL != "" && o.Batch == 0:
		return errors.New("the engine is measured beside batches only")
	case o.EngineRedisURL != "" && o.Campaign != "":
		return errors.New("the engine comparison needs campaigns created here, of the same packets")
	case o.Stream && o.Batch == 0:
		return errors.New("the stream is measured beside batches only: give the grabs a message with batch")
	case o.Stream && o.Campaign != "":
		return errors.New("the stream comparison needs campaigns created here, one for the stream and one for the batch route")
	case o.Stream && (o.Streams < 0 || o.Window < 0):
		return errors.New("streams and window must be positive")
	case o.Stream && o.Window > 0 && o.Window < o.Batch:
		return errors.New("the window must hold a message: at least batch grabs")
	}
	return nil
}

// MintTokens signs one token per user u1..uN, valid for ttl.
func MintTokens(secret token.Secret, users int, ttl time.Duration) ([]string, error) {
	toks := make([]string, users)
	now := time.Now()
	for i := range toks {
		t, err := token.Mint(secret, UserName(i), ttl, now)
		if err != nil {
			return nil, err
		}
		toks[i] = t
	}
	return toks, nil
}

// RunHTTP creates a campaign on the serve at o.URL (or uses o.Campaign),
// lets o.Concurrency clients grab for o.Users distinct users and reports
// throughput, latency and the outcome mix. With o.Trivial it then measures
// a trivial handler the same way.
func RunHTTP(ctx context.Context, o HTTPOptions) (*HTTPReport, error) {
	if o.Clicks == 0 {
		o.Clicks = 1
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = func(string, int64) Progress { return nopProgress{} }
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.Concurrency, MaxConnsPerHost: o.Concurrency, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	httpc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var toks []string
	if o.Batch == 0 {
		bar := o.Progress("minting tokens", int64(o.Users))
		var err error
		toks, err = MintTokens(o.Secret, o.Users, 2*time.Hour)
		bar.Done()
		if err != nil {
			return nil, err
		}
	}
	// Retries off: each grab is one request, counted with its answer.
	api, err := client.New(o.URL, client.Options{Token: o.AdminKey, HTTPClient: httpc, Retry: client.NoRetry})
	if err != nil {
		return nil, err
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Stream {
		o.Streams = cmp.Or(o.Streams, o.Concurrency)
		o.Window = cmp.Or(o.Window, max(DefaultStreamWindow, o.Batch))
		return runStreamRounds(ctx, api, httpc, o)
	}
	trivURL := strings.TrimRight(o.TrivialURL, "/")
	if o.Batch == 0 && o.Trivial && trivURL == "" {
		var stop func()
		if trivURL, stop, err = StartTrivial(); err != nil {
			return nil, err
		}
		defer stop()
	}
	rep := &HTTPReport{}
	var serves, others []*HTTPResult
	var engines []*Result
	for i := 0; i < o.Rounds; i++ {
		rd, s, other, eng, err := runRound(ctx, api, httpc, toks, trivURL, o, i)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		rep.Rounds = append(rep.Rounds, rd)
		serves, others, engines = append(serves, s), append(others, other), append(engines, eng)
	}
	// The round of the median ratio (the lower middle one of an even
	// count) gives the detailed figures.
	ratio := func(r HTTPRound) float64 { return cmp.Or(r.Ratio, r.EngineRatio) }
	order := make([]int, len(rep.Rounds))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ratio(rep.Rounds[order[a]]) < ratio(rep.Rounds[order[b]]) })
	m := order[(len(order)-1)/2]
	rep.Serve, rep.Trivial, rep.Engine = serves[m], others[m], engines[m]
	rep.Ratio, rep.EngineRatio = rep.Rounds[m].Ratio, rep.Rounds[m].EngineRatio
	return rep, nil
}

// runRound is round i: serve, and the trivial handler or the engine beside
// it, the first of the two alternating from round to round.
func runRound(ctx context.Context, api *client.Client, httpc *http.Client, toks []string, trivURL string, o HTTPOptions, i int) (HTTPRound, *HTTPResult, *HTTPResult, *Result, error) {
	var rd HTTPRound
	var other *HTTPResult
	var eng *Result
	id := o.Campaign
	if id == "" {
		c, err := api.CreateCampaign(ctx, client.CampaignSpec{TotalCents: o.Total, Count: o.Packets})
		if err != nil {
			return rd, nil, nil, nil, fmt.Errorf("create the campaign: %w", err)
		}
		id = c.ID
	}
	serve := func() (*HTTPResult, error) { return measureServe(ctx, api, httpc, id, toks, o) }
	beside := func() error {
		var err error
		other, eng, err = measureBeside(ctx, httpc, id, toks, trivURL, o, i)
		return err
	}
	var s *HTTPResult
	var err error
	rd.First = "serve"
	if i%2 == 1 && (o.EngineRedisURL != "" || (o.Batch == 0 && o.Trivial)) {
		rd.First = "trivial"
		if o.EngineRedisURL != "" {
			rd.First = "engine"
		}
		if err = beside(); err == nil {
			s, err = serve()
		}
	} else if s, err = serve(); err == nil {
		err = beside()
	}
	if err != nil {
		return rd, nil, nil, nil, err
	}
	rd.Campaign = id
	rd.ServePerSec, rd.ServeGrantsSec, rd.ServeCPUUsPerReq = s.PerSec, s.GrantsSec, s.CPUUsPerRequest
	if other != nil {
		rd.TrivialPerSec = other.PerSec
		if other.PerSec > 0 {
			rd.Ratio = round(s.PerSec/other.PerSec, 3)
		}
	}
	if eng != nil {
		rd.EngineGrantsSec = eng.GrantsPerSec
		if eng.GrantsPerSec > 0 {
			rd.EngineRatio = round(s.GrantsSec/eng.GrantsPerSec, 3)
		}
	}
	return rd, s, other, eng, nil
}

// measureServe measures serve once, single grabs or batches, with its
// CPU time when o.ServePID is set.
func measureServe(ctx context.Context, api *client.Client, httpc *http.Client, id string, toks []string, o HTTPOptions) (*HTTPResult, error) {
	return withServeCPU(o, "serve", id, func() (*HTTPResult, error) {
		if o.Batch > 0 {
			return measureBatch(ctx, httpc, id, o)
		}
		return measureHTTP(ctx, api, id, toks, o, "grabbing")
	})
}

// withServeCPU runs the measurement m of serve (target, on campaign id),
// with serve's CPU time around it when o.ServePID is set.
func withServeCPU(o HTTPOptions, target, id string, m func() (*HTTPResult, error)) (*HTTPResult, error) {
	cpu0, err := processCPUOf(o.ServePID)
	if err != nil {
		return nil, err
	}
	r, err := m()
	if err != nil {
		return nil, err
	}
	r.Target, r.Campaign = target, id
	if o.ServePID > 0 {
		cpu1, err := processCPUOf(o.ServePID)
		if err != nil {
			return nil, err
		}
		r.CPUSeconds = round(cpu1-cpu0, 3)
		if r.Requests > 0 {
			r.CPUUsPerRequest = round(r.CPUSeconds*1e6/float64(r.Requests), 2)
			r.CPUUsPerUser = round(r.CPUSeconds*1e6/float64(r.usersCarried()), 2)
		}
	}
	return r, nil
}

// measureBeside measures what round i compares serve with: the engine on
// o.EngineRedisURL, or the trivial handler at trivURL, or nothing.
func measureBeside(ctx context.Context, httpc *http.Client, id string, toks []string, trivURL string, o HTTPOptions, i int) (*HTTPResult, *Result, error) {
	switch {
	case o.EngineRedisURL != "":
		eng, err := Run(ctx, Engine, Options{
			Packets: o.Packets, Users: o.Users, Total: o.Total, Seed: uint64(20261122 + i),
			Concurrency: o.Batch * o.Concurrency, Runs: 1, RedisURL: o.EngineRedisURL,
			Progress: o.Progress,
		})
		if err == nil && !eng.OK {
			err = fmt.Errorf("the engine's invariant checks failed: %s", strings.Join(eng.Problems, "; "))
		}
		return nil, eng, err
	case o.Batch == 0 && o.Trivial:
		triv, err := client.New(trivURL, client.Options{HTTPClient: httpc, Retry: client.NoRetry})
		if err != nil {
			return nil, nil, err
		}
		other, err := measureHTTP(ctx, triv, id, toks, o, "trivial handler")
		if err != nil {
			return nil, nil, err
		}
		other.Target = "trivial"
		return other, nil, nil
	}
	return nil, nil, nil
}

// usersCarried is how many users' grabs the measurement's requests
// carried: its outcomes' sum (one a request for single grabs).
func (r *HTTPResult) usersCarried() int64 {
	var n int64
	for _, v := range r.Outcomes {
		n += v
	}
	return max(n, 1)
}

// processCPUOf is process pid's CPU time so far (user + system), in
// seconds, from /proc/PID/stat; 0 for pid 0.
func processCPUOf(pid int) (float64, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("the serve's CPU time: %w", err)
	}
	// The command name may hold spaces: the fields count from its ")".
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("the serve's CPU time: /proc/%d/stat unreadable", pid)
	}
	// utime and stime, fields 14 and 15 of stat(5), in clock ticks (100 a
	// second on Linux).
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("the serve's CPU time: %w", err)
	}
	return float64(ut+st) / 100, nil
}

// measureHTTP grabs campaign id as each user of toks in turn, with
// o.Concurrency requests in flight, through the client api.
func measureHTTP(ctx context.Context, api *client.Client, id string, toks []string, o HTTPOptions, label string) (*HTTPResult, error) {
	total := int64(len(toks) * o.Clicks)
	bar := o.Progress(label, total)
	defer bar.Done()
	users := make([]*client.Client, len(toks))
	for i, t := range toks {
		users[i] = api.As(t)
	}
	var next atomic.Int64
	var mu sync.Mutex
	outcomes, statuses := map[string]int64{}, map[string]int64{}
	var errs atomic.Int64
	lats := make([]latencies, o.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			localOut, localStatus := map[string]int64{}, map[string]int64{}
			for ctx.Err() == nil {
				n := next.Add(1) - 1
				if n >= total {
					break
				}
				t0 := time.Now()
				g, err := users[n%int64(len(users))].Grab(ctx, id)
				var e *client.Error
				switch {
				case err == nil:
					localStatus["200"]++
					localOut[g.Outcome]++
				case errors.As(err, &e):
					localStatus[strconv.Itoa(e.Status)]++
				default:
					errs.Add(1)
					continue
				}
				lats[w].add(time.Since(t0))
				bar.Add(1)
			}
			mu.Lock()
			for k, v := range localOut {
				outcomes[k] += v
			}
			for k, v := range localStatus {
				statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := histogramOf(lats)
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q))/1000, 3) }
	var done int64
	for _, v := range statuses {
		done += v
	}
	r := &HTTPResult{
		Users: len(toks), Requests: done, Concurrency: o.Concurrency, Seconds: round(el, 3),
		PerSec: round(float64(done)/el, 1), P50ms: ms(50), P90ms: ms(90), P99ms: ms(99),
		MaxMs: round(float64(h.Max())/1000, 3), Outcomes: outcomes, Statuses: statuses, Errors: errs.Load(),
	}
	if g := outcomes["granted"]; g > 0 {
		r.GrantsSec = round(float64(g)/el, 1)
	}
	return r, nil
}

// measureBatch grabs campaign id for o.Users users o.Clicks times each,
// o.Batch users a request to the gateway's batch route, with
// o.Concurrency requests in flight. Requests counts the requests,
// Outcomes the users' outcomes.
func measureBatch(ctx context.Context, httpc *http.Client, id string, o HTTPOptions) (*HTTPResult, error) {
	key := cmp.Or(o.GatewayKey, o.AdminKey)
	total := int64(o.Users) * int64(o.Clicks)
	batches := (total + int64(o.Batch) - 1) / int64(o.Batch)
	bar := o.Progress("grabbing in batches", batches)
	defer bar.Done()
	url := o.URL + "/v1/campaigns/" + id + "/grabs"
	var next atomic.Int64
	var mu sync.Mutex
	outcomes, statuses := map[string]int64{}, map[string]int64{}
	var errs atomic.Int64
	lats := make([]latencies, o.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			localOut, localStatus := map[string]int64{}, map[string]int64{}
			var body []byte
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if k >= batches {
					break
				}
				body = append(body[:0], `{"users":[`...)
				for n := k * int64(o.Batch); n < min((k+1)*int64(o.Batch), total); n++ {
					if n > k*int64(o.Batch) {
						body = append(body, ',')
					}
					body = strconv.AppendQuote(body, UserName(int(n%int64(o.Users))))
				}
				body = append(body, "]}"...)
				t0 := time.Now()
				status, res, err := postBatch(ctx, httpc, url, key, body)
				if err != nil {
					errs.Add(1)
					continue
				}
				localStatus[strconv.Itoa(status)]++
				for _, r := range res {
					localOut[cmp.Or(r.Outcome, r.Error)]++
				}
				lats[w].add(time.Since(t0))
				bar.Add(1)
			}
			mu.Lock()
			for k, v := range localOut {
				outcomes[k] += v
			}
			for k, v := range localStatus {
				statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := histogramOf(lats)
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q))/1000, 3) }
	var done int64
	for _, v := range statuses {
		done += v
	}
	r := &HTTPResult{
		Users: o.Users, Requests: done, Concurrency: o.Concurrency, Seconds: round(el, 3),
		PerSec: round(float64(done)/el, 1), P50ms: ms(50), P90ms: ms(90), P99ms: ms(99),
		MaxMs: round(float64(h.Max())/1000, 3), Outcomes: outcomes, Statuses: statuses, Errors: errs.Load(),
	}
	if g := outcomes["granted"]; g > 0 {
		r.GrantsSec = round(float64(g)/el, 1)
	}
	return r, nil
}

// batchResult is one user's result in a batch's answer.
type batchResult struct {
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
}

// postBatch sends one batch and reads its answer: the status and, with
// 200, the users' results.
func postBatch(ctx context.Context, httpc *http.Client, url, key string, body []byte) (int, []batchResult, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, err = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil, err
	}
	var out struct {
		Results []batchResult `json:"results"`
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out.Results, err
}

// trivialBody is what the trivial handler answers: a grab reply's size.
var trivialBody = []byte(`{"campaign":"trivial","outcome":"already_granted","packet_id":"trivial/1","amount":"1.00","amount_cents":100}` + "\n")

// TrivialHandler answers every request with a fixed JSON body: the floor
// of what any Go HTTP service costs on this machine.
func TrivialHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(trivialBody)
	})
}

// StartTrivial serves TrivialHandler on a free loopback port until stop.
func StartTrivial() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: TrivialHandler(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}
