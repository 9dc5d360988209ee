package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/split"
)

// The discount benchmark: reserve + confirm of random instant discounts,
// hongbao's discount engine (one script decides each reservation, calls
// coalesced per shard) against a hand-written multi-script version of the
// card schemes' published design (pop, usage, rollback and journal, each
// its own call), on the same amounts and users, on the same Redis in the
// same run. See DiscountOptions and the published* functions.

// DiscountOptions configure the discount benchmark. Zero fields are errors
// unless documented otherwise.
type DiscountOptions struct {
	// Quota, Budget (cents), Min, Max, PerUserCount and PerUserAmount are
	// the campaign; Seed draws its amounts, the same for both designs.
	Quota            int
	Budget, Min, Max int64
	PerUserCount     int
	PerUserAmount    int64
	Seed             uint64
	// Shards of hongbao's campaign (all on the one Redis). Default 1.
	Shards int
	// Users u1..uN each pay one order: a reservation, then its confirm.
	Users int
	// Concurrency is hongbao's payments in flight (goroutines).
	Concurrency int
	// BaselineWorkers is the published design's workers, each on one
	// blocking connection.
	BaselineWorkers int
	// Runs is how many times the pair is measured; the median of each
	// design is reported. Default 1.
	Runs int
	// MaxBatch is the engine's Config.MaxBatch; 0 means its default.
	MaxBatch int
	// RedisURL, RedisServer, AOF and RedisCPUs say which Redis, as in
	// Options.
	RedisURL, RedisServer, AOF, RedisCPUs string
	// Progress, if not nil, starts a progress bar for a long phase.
	Progress func(label string, total int64) Progress
}

// Validate checks the options.
func (o DiscountOptions) Validate() error {
	switch {
	case o.Users < 1 || o.Concurrency < 1 || o.BaselineWorkers < 1:
		return errors.New("users, concurrency and baseline workers must be at least 1")
	case o.Runs < 0 || o.Shards < 0 || o.PerUserCount < 0 || o.PerUserAmount < 0:
		return errors.New("runs, shards and limits must not be negative")
	}
	switch o.AOF {
	case "", "off", "everysec", "always":
	default:
		return fmt.Errorf("aof must be off, everysec or always, not %q", o.AOF)
	}
	_, err := o.split().Normalize()
	return err
}

func (o DiscountOptions) split() split.DiscountSpec {
	return split.DiscountSpec{Budget: o.Budget, Quota: o.Quota, Min: o.Min, Max: o.Max}
}

func (o DiscountOptions) progress(label string, total int64) Progress {
	if o.Progress == nil {
		return nopProgress{}
	}
	return o.Progress(label, total)
}

// DiscountResult is one design's median run.
type DiscountResult struct {
	Design string `json:"design"` // "hongbao" or "published"
	// Payments counts reservations confirmed: the headline is
	// PaymentsPerSec, reserve + confirm pairs per second of the phase.
	Payments       int64     `json:"payments"`
	Refused        int64     `json:"refused"` // exhausted or over a limit
	Seconds        float64   `json:"seconds"`
	PaymentsPerSec float64   `json:"payments_per_sec"`
	RunsPerSec     []float64 `json:"runs_payments_per_sec"`
	P50Ms          float64   `json:"p50_ms"`
	P99Ms          float64   `json:"p99_ms"`
	P999Ms         float64   `json:"p999_ms"`
	// RedisUsPerReservation is the Redis CPU of the phase per
	// reservation made (confirms and all other calls included), µs.
	RedisUsPerReservation float64 `json:"redis_us_per_reservation"`
	// CallsPerPayment is how many calls reached Redis per payment: script
	// calls for hongbao (batches), commands for the published design.
	CallsPerPayment float64  `json:"redis_calls_per_payment"`
	OK              bool     `json:"ok"`
	Problems        []string `json:"problems,omitempty"`
}

// DiscountComparison is the benchmark's answer: both designs, measured in
// the same runs on the same Redis.
type DiscountComparison struct {
	Quota           int             `json:"quota"`
	Users           int             `json:"users"`
	BudgetCents     int64           `json:"budget_cents"`
	Shards          int             `json:"shards"`
	Concurrency     int             `json:"concurrency"`
	BaselineWorkers int             `json:"baseline_workers"`
	Runs            int             `json:"runs"`
	Redis           string          `json:"redis"`
	AOF             string          `json:"aof"`
	Hongbao         *DiscountResult `json:"hongbao"`
	Published       *DiscountResult `json:"published"`
	// Ratio is hongbao's payments/s over the published design's;
	// CPURatio the published design's Redis CPU per reservation over
	// hongbao's.
	Ratio    float64 `json:"ratio"`
	CPURatio float64 `json:"cpu_ratio"`
}

// dstats is what one design measured in one run.
type dstats struct {
	payments, refused, calls int64
	seconds, cpuSeconds      float64
	lats                     []latencies
	problems                 []string
}

// RunDiscount measures both designs Runs times, each run on one Redis
// (a fresh one of our own, or the given one with keys of its own):
// hongbao first, then the published design.
func RunDiscount(ctx context.Context, o DiscountOptions) (*DiscountComparison, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.Runs, o.Shards = max(o.Runs, 1), max(o.Shards, 1)
	lists, err := split.Discounts(o.split(), o.Seed)
	if err != nil {
		return nil, err
	}
	amounts := lists.Deal(1, o.Seed)[0]
	var ours, theirs []*dstats
	aof := ""
	for i := range o.Runs {
		t, err := openTarget(ctx, Options{RedisURL: o.RedisURL, RedisServer: o.RedisServer, AOF: o.AOF, RedisCPUs: o.RedisCPUs})
		if err != nil {
			return nil, err
		}
		aof = t.aof(ctx)
		a, err := runHongbaoDiscount(ctx, t, o, fmt.Sprintf("hongbao %d/%d", i+1, o.Runs))
		if err == nil {
			var b *dstats
			b, err = runPublished(ctx, t, o, amounts, fmt.Sprintf("published %d/%d", i+1, o.Runs))
			theirs = append(theirs, b)
		}
		t.close()
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		ours = append(ours, a)
	}
	c := &DiscountComparison{Quota: o.Quota, Users: o.Users, BudgetCents: o.Budget, Shards: o.Shards, Concurrency: o.Concurrency,
		BaselineWorkers: o.BaselineWorkers, Runs: o.Runs, Redis: "own", AOF: aof,
		Hongbao: summarizeDiscount("hongbao", ours), Published: summarizeDiscount("published", theirs)}
	if o.RedisURL != "" {
		c.Redis = "given"
	}
	if c.Published.PaymentsPerSec > 0 {
		c.Ratio = round(c.Hongbao.PaymentsPerSec/c.Published.PaymentsPerSec, 2)
	}
	if c.Hongbao.RedisUsPerReservation > 0 {
		c.CPURatio = round(c.Published.RedisUsPerReservation/c.Hongbao.RedisUsPerReservation, 2)
	}
	return c, nil
}

// summarizeDiscount picks the median run by payments/s.
func summarizeDiscount(design string, runs []*dstats) *DiscountResult {
	r := &DiscountResult{Design: design}
	perSec := func(s *dstats) float64 { return perSecond(s.payments, s.seconds) }
	var m *dstats
	r.RunsPerSec, r.Problems, m = medianRun(runs, perSec, func(s *dstats) []string { return s.problems })
	r.OK = len(r.Problems) == 0
	r.Payments, r.Refused, r.Seconds = m.payments, m.refused, round(m.seconds, 4)
	r.PaymentsPerSec = round(perSec(m), 1)
	h := histogramOf(m.lats)
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q))/1000, 3) }
	r.P50Ms, r.P99Ms, r.P999Ms = ms(50), ms(99), ms(99.9)
	if m.payments > 0 {
		// Every reservation made is confirmed: one per payment.
		r.RedisUsPerReservation = round(m.cpuSeconds*1e6/float64(m.payments), 3)
		r.CallsPerPayment = round(float64(m.calls)/float64(m.payments), 3)
	}
	return r
}

// measureWorkers splits the users among n workers, starts them all at
// once, waits for them and records the wall clock and Redis's CPU of the
// phase. work pays for the users from..to-1, timing each into lat.
func measureWorkers(ctx context.Context, t *target, o DiscountOptions, label string, n int,
	work func(w, from, to int, lat *latencies, bar Progress)) (*dstats, error) {
	ds := &dstats{lats: make([]latencies, n)}
	start := make(chan struct{})
	bar := o.progress(label, int64(o.Users))
	var wg sync.WaitGroup
	for w := range n {
		from, to := userRange(w, n, o.Users)
		wg.Go(func() {
			<-start
			work(w, from, to, &ds.lats[w], bar)
		})
	}
	cpu0, err := t.cpuSeconds(ctx)
	if err != nil {
		close(start)
		wg.Wait()
		bar.Done()
		return nil, err
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	ds.seconds = time.Since(t0).Seconds()
	bar.Done()
	cpu1, err := t.cpuSeconds(ctx)
	if err != nil {
		return nil, err
	}
	ds.cpuSeconds = cpu1 - cpu0
	return ds, nil
}

// runHongbaoDiscount measures hongbao: Discounts.Create loads the amounts
// (the same spec and seed as the published design's list), then
// Concurrency goroutines each pay once for every user of their share:
// Discounts.Reserve, then Discounts.Confirm.
func runHongbaoDiscount(ctx context.Context, t *target, o DiscountOptions, label string) (*dstats, error) {
	eng, err := hongbao.New(hongbao.Config{Redis: t.client, MaxBatch: o.MaxBatch, WithoutLedger: true})
	if err != nil {
		return nil, err
	}
	seed := o.Seed
	id := "bench-d-" + t.runID
	if t.shared {
		defer dropHongbao(t, id, o.Shards)
	}
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: id, Budget: o.Budget, Quota: o.Quota,
		Min: o.Min, Max: o.Max, PerUserCount: o.PerUserCount, PerUserAmount: o.PerUserAmount, Shards: o.Shards, Seed: &seed})
	if err != nil {
		return nil, err
	}
	counts := make([]struct{ payments, refused, cents int64 }, o.Concurrency)
	var probs problems
	ds, err := measureWorkers(ctx, t, o, label, o.Concurrency, func(w, from, to int, lat *latencies, bar Progress) {
		tk := ticker{bar: bar}
		defer tk.flush()
		for u := from; u < to; u++ {
			t0 := time.Now()
			cents, paid, err := payHongbao(ctx, eng, d.ID, UserName(u), 10*o.Max)
			lat.add(time.Since(t0))
			if err != nil {
				probs.add("%s: %v", UserName(u), err)
				return
			}
			if paid {
				counts[w].payments++
				counts[w].cents += cents
			} else {
				counts[w].refused++
			}
			tk.tick()
		}
	})
	if err != nil {
		return nil, err
	}
	var cents int64
	for _, c := range counts {
		ds.payments, ds.refused, cents = ds.payments+c.payments, ds.refused+c.refused, cents+c.cents
	}
	st := eng.Discounts().Stats()
	ds.calls = int64(st.Batches)
	checkHongbao(ctx, eng, d.ID, ds, cents, &probs)
	ds.problems = probs.all()
	return ds, nil
}

// payHongbao reserves a discount for user's order and confirms it; paid
// is false when the reservation was refused (exhausted, over a limit).
func payHongbao(ctx context.Context, eng *hongbao.Engine, id, user string, order int64) (cents int64, paid bool, err error) {
	r, err := eng.Discounts().Reserve(ctx, id, user, "o1", order)
	if err != nil {
		return 0, false, err
	}
	if !r.Outcome.HasAmount() {
		return 0, false, nil
	}
	c, err := eng.Discounts().Confirm(ctx, id, user, "o1")
	if err != nil {
		return 0, false, err
	}
	return c.Cents, true, nil
}

// checkHongbao checks hongbao's run: the engine's audit of the contents,
// and what the clients were told against it.
func checkHongbao(ctx context.Context, eng *hongbao.Engine, id string, ds *dstats, cents int64, probs *problems) {
	a, err := eng.Discounts().Audit(ctx, id)
	if err != nil {
		probs.add("audit: %v", err)
		return
	}
	for _, p := range a.Problems {
		probs.add("audit: %s", p)
	}
	if a.ConfirmedCount != ds.payments || a.ConfirmedCents != cents {
		probs.add("clients were told of %d payments, %d cents; Redis holds %d, %d cents", ds.payments, cents, a.ConfirmedCount, a.ConfirmedCents)
	}
}

// dropHongbao unlinks a discount campaign's keys from a shared Redis.
func dropHongbao(t *target, id string, shards int) {
	for _, k := range redisstore.Default.DiscountLayout(id, shards) {
		t.drop(k.Meta, k.Pool, k.Usage, k.Resv, k.Holds, k.Confirms, k.Dead, k.Staging, k.Xfers, k.Applied, k.Blocked)
	}
	c := t.client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Do(ctx, c.B().Zrem().Key(redisstore.Default.Index(redisstore.Discount)).Member(id).Build()).Error()
}
