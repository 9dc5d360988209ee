package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
)

// benchDiscountCmd is "hongbao bench --mode discount": reserve + confirm
// of discounts through hongbao's engine against a hand-written
// multi-script version of the published design, in the same run on the
// same Redis (package bench, RunDiscount).
type benchDiscountCmd struct {
	benchBase
	aof, budget, min, max, perUserAmt  string
	quota, users, perUserCount, shards int
	concurrency, baseline, runs        int
	seed                               uint64
	o                                  bench.DiscountOptions
}

// benchDiscountOut is the --json output of --mode discount.
type benchDiscountOut struct {
	*bench.DiscountComparison
	Pinned string `json:"pinned,omitempty"`
}

const benchDiscountUsage = `Usage: hongbao bench --mode discount [flags]

Loads the same discount amounts (split.Discounts with --seed) twice on one
Redis: as a hongbao discount campaign, whose --concurrency users in flight
reserve and confirm through the engine (one script decides each
reservation; calls coalesced per shard), and as the list of the published
card-scheme design, whose --baseline-workers workers (one blocking
connection each) pay step by step: journal start, pop (amount plus
compensation, a script), usage (HINCRBY), rollback or clip when over a
limit, journal done, each its own call. Every user pays one order. It
reports payments (reserve + confirm) per second, latency per payment and
Redis CPU per reservation for both, the ratio, and the invariant checks of
both designs; each run measures both on the same fresh redis-server.

Every flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_QUOTA=1000.

Flags:`

func (b *benchDiscountCmd) declare(fs *flag.FlagSet) {
	fs.String("mode", "discount", "discount: this benchmark")
	fs.StringVar(&b.aof, "aof", "off", "persistence of our own redis-server: off, everysec or always")
	fs.IntVar(&b.quota, "quota", 200000, "discounts in the campaign")
	fs.IntVar(&b.users, "users", 200000, "users u1..uN; each pays one order")
	fs.StringVar(&b.budget, "budget", "", "the budget; default 1.00 per discount")
	fs.StringVar(&b.min, "min", "0.01", "smallest discount")
	fs.StringVar(&b.max, "max", "2.00", "largest discount")
	fs.IntVar(&b.perUserCount, "per-user-count", 3, "most discounts per user (0: no limit)")
	fs.StringVar(&b.perUserAmt, "per-user-amount", "5.00", "most per user in all (0: no limit)")
	fs.IntVar(&b.shards, "shards", 1, "shards of hongbao's campaign (all on the one Redis)")
	fs.Uint64Var(&b.seed, "seed", 20261122, "amounts seed: the same amounts for both designs")
	fs.IntVar(&b.concurrency, "concurrency", 256, "hongbao: payments in flight (goroutines)")
	fs.IntVar(&b.baseline, "baseline-workers", 20, "the published design: workers, one blocking connection each")
	fs.IntVar(&b.runs, "runs", 3, "runs; the median of each design is reported")
}

// parseFlags checks everything before anything starts.
func (b *benchDiscountCmd) parseFlags(args []string) error {
	fs, err := b.parseCommand("bench", benchDiscountUsage, args, b.declareCommon, b.declare)
	if err != nil {
		return err
	}
	url, err := b.redis.target()
	if err != nil {
		return err
	}
	b.o = bench.DiscountOptions{
		Quota: b.quota, Users: b.users, PerUserCount: b.perUserCount, Shards: b.shards, Seed: b.seed,
		Concurrency: b.concurrency, BaselineWorkers: b.baseline, Runs: b.runs, MaxBatch: b.maxBatch,
		RedisURL: url, RedisServer: b.redis.server, AOF: b.aof,
		Progress: b.progress,
	}
	b.o.Budget = int64(b.quota) * 100
	for _, a := range []struct {
		name, v string
		to      *int64
	}{{"budget", b.budget, &b.o.Budget}, {"min", b.min, &b.o.Min}, {"max", b.max, &b.o.Max}, {"per-user-amount", b.perUserAmt, &b.o.PerUserAmount}} {
		if a.v == "" {
			continue
		}
		c, err := centsFlag(a.name, a.v)
		if err != nil {
			return err
		}
		*a.to = c
	}
	if b.runs < 1 || b.maxBatch < 0 || b.maxBatch > 1000 {
		return usageErrorf("--runs must be at least 1 and --max-batch within 0..1000")
	}
	if b.redis.url != "" && given(fs)["aof"] {
		return usageErrorf("--aof applies only when bench starts its own redis-server")
	}
	if err := b.o.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// open checks that the runs can start and pins Redis and the bench to
// CPUs of their own when it starts its own Redis.
func (b *benchDiscountCmd) open(context.Context) error {
	if err := b.redis.needServer(); err != nil {
		return err
	}
	b.o.RedisCPUs = b.pinOwn()
	return nil
}

func (b *benchDiscountCmd) run(ctx context.Context) error {
	o := &b.o
	b.say("hongbao bench --mode discount: %d discounts, %s, %d users, %d runs, hongbao %d in flight, the published design %d workers\n",
		o.Quota, hongbao.FormatCents(o.Budget), o.Users, o.Runs, o.Concurrency, o.BaselineWorkers)
	c, err := bench.RunDiscount(ctx, *o)
	if err != nil {
		return err
	}
	if b.json {
		if err := json.NewEncoder(b.env.Stdout).Encode(benchDiscountOut{DiscountComparison: c, Pinned: b.pinned}); err != nil {
			return err
		}
	} else {
		printBenchDiscount(b.env.Stdout, c)
	}
	var failed []string
	for _, r := range []*bench.DiscountResult{c.Hongbao, c.Published} {
		if !r.OK {
			failed = append(failed, r.Design+": "+strings.Join(r.Problems, "; "))
		}
	}
	if len(failed) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("invariant checks FAILED: %s", strings.Join(failed, " | "))}
	}
	return nil
}

func printBenchDiscount(w io.Writer, c *bench.DiscountComparison) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n%-10s %14s %10s %10s %10s %16s %12s  %s\n", "design", "payments/s", "p50 ms", "p99 ms", "p99.9 ms", "Redis µs/resv", "calls/pay", "runs")
	for _, r := range []*bench.DiscountResult{c.Hongbao, c.Published} {
		ok := "ok"
		if !r.OK {
			ok = "FAILED"
		}
		p("%-10s %14.0f %10.3f %10.3f %10.3f %16.2f %12.2f  %v %s\n", r.Design, r.PaymentsPerSec, r.P50Ms, r.P99Ms, r.P999Ms,
			r.RedisUsPerReservation, r.CallsPerPayment, r.RunsPerSec, ok)
	}
	p("\nhongbao / published: %.2fx the payments per second, %.2fx less Redis CPU per reservation (AOF %s, Redis %s)\n",
		c.Ratio, c.CPURatio, c.AOF, c.Redis)
}
