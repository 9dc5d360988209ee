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
}

// HTTPReport holds the serve measurement and, when asked, the trivial
// handler's, measured in the same run.
type HTTPReport struct {
	Serve   *HTTPResult `json:"serve"`
	Trivial *HTTPResult `json:"trivial,omitempty"`
	// Ratio is serve requests/s over the trivial handler's.
	Ratio float64 `json:"ratio,omitempty"`
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
	id := o.Campaign
	if id == "" {
		c, err := api.CreateCampaign(ctx, client.CampaignSpec{TotalCents: o.Total, Count: o.Packets})
		if err != nil {
			return nil, fmt.Errorf("create the campaign: %w", err)
		}
		id = c.ID
	}
	rep := &HTTPReport{}
	if o.Batch > 0 {
		rep.Serve, err = measureBatch(ctx, httpc, id, o)
		if err != nil {
			return nil, err
		}
		rep.Serve.Target, rep.Serve.Campaign = "serve", id
		return rep, nil
	}
	rep.Serve, err = measureHTTP(ctx, api, id, toks, o, "grabbing")
	if err != nil {
		return nil, err
	}
	rep.Serve.Target, rep.Serve.Campaign = "serve", id
	if o.Trivial {
		url := strings.TrimRight(o.TrivialURL, "/")
		if url == "" {
			var stop func()
			if url, stop, err = StartTrivial(); err != nil {
				return nil, err
			}
			defer stop()
		}
		triv, err := client.New(url, client.Options{HTTPClient: httpc, Retry: client.NoRetry})
		if err != nil {
			return nil, err
		}
		rep.Trivial, err = measureHTTP(ctx, triv, id, toks, o, "trivial handler")
		if err != nil {
			return nil, err
		}
		rep.Trivial.Target = "trivial"
		if rep.Trivial.PerSec > 0 {
			rep.Ratio = round(rep.Serve.PerSec/rep.Trivial.PerSec, 3)
		}
	}
	return rep, nil
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
