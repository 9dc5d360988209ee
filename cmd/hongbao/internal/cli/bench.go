package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
)

type benchFlags struct {
	mode        string
	aof         string
	packets     int
	users       int
	total       string
	split       string
	seed        uint64
	concurrency int
	classic     int
	runs        int
	sweep       string
	svg         string
	replicas    int
	waitN       int
	waitTimeout time.Duration
	shards      int
	skew        float64
	scriptTimes bool
}

// benchPair is the --json output of --mode both.
type benchPair struct {
	Engine  *bench.Result `json:"engine"`
	Classic *bench.Result `json:"classic"`
	// Ratio is engine grants/s over classic grants/s.
	Ratio  float64 `json:"ratio"`
	Pinned string  `json:"pinned,omitempty"`
}

// benchSweep is the --json output of --sweep.
type benchSweep struct {
	Sweep  []bench.SweepPoint `json:"sweep"`
	Pinned string             `json:"pinned,omitempty"`
}

// benchSingle is the --json output of one mode: the result and where it ran.
type benchSingle struct {
	*bench.Result
	Pinned string `json:"pinned,omitempty"`
}

// benchCmd is "hongbao bench": benchDesignsCmd, with --mode http
// benchHTTPCmd, with --mode discount benchDiscountCmd; parseFlags picks
// one by the mode.
type benchCmd struct {
	env *IO
	command
}

func newBenchCmd(env *IO) command { return &benchCmd{env: env} }

func (b *benchCmd) parseFlags(args []string) error {
	switch {
	case benchHTTPRequested(b.env, args):
		b.command = &benchHTTPCmd{base: base{env: b.env}}
	case benchMode(b.env, args) == "discount":
		b.command = &benchDiscountCmd{benchBase: benchBase{base: base{env: b.env}}}
	default:
		b.command = &benchDesignsCmd{benchBase: benchBase{base: base{env: b.env}}}
	}
	return b.command.parseFlags(args)
}

// flagVariants are the command lines of each mode's flags (the config
// file's bench: section may set any of them).
func (b *benchCmd) flagVariants() [][]string {
	return [][]string{{"-h"}, {"--mode", "http", "-h"}, {"--mode", "discount", "-h"}}
}

// benchDesignsCmd measures the engine against the classic design (package
// bench).
type benchDesignsCmd struct {
	benchBase
	f      benchFlags
	set    map[string]bool // the flags given on the command line
	o      bench.Options
	modes  []bench.Mode
	levels []int // --sweep's concurrencies
}

// benchBase is what both bench modes (the designs, --mode discount) have
// alike: the Redis the runs use, the CPUs Redis and the bench run on, the
// engine's batch cap and JSON output.
type benchBase struct {
	base
	redis    redisFlags
	maxBatch int
	pin      bool
	json     bool
	pinned   string // where open pinned Redis and the bench, if it did
}

// declareCommon declares the flags of benchBase.
func (b *benchBase) declareCommon(fs *flag.FlagSet) {
	b.redis.declare(fs, "shared by every run, keys of their own; default: a fresh private redis-server per run", true)
	fs.IntVar(&b.maxBatch, "max-batch", 0, "the engine's MaxBatch; 0: the engine's default")
	fs.BoolVar(&b.pin, "pin", true, "when starting our own redis-server on 2+ cores: Redis on the first CPU, the bench on the others (taskset)")
	fs.BoolVar(&b.json, "json", false, "print one JSON object instead of the report")
}

// say prints a line of the report, which --json leaves out.
func (b *benchBase) say(format string, a ...any) {
	if !b.json {
		fmt.Fprintf(b.env.Stdout, format, a...)
	}
}

// progress shows a phase's progress, which --json leaves out.
func (b *benchBase) progress(label string, total int64) bench.Progress {
	return startProgress(b.env, !b.json, label, total)
}

// pinOwn pins our own Redis and the bench to CPUs of their own
// (bench.Pin) until the command closes, when the runs start their own
// Redis and --pin asks for it, and returns Redis's CPUs ("" when not
// pinned); say tells what happened. A bench that could not be pinned runs
// anyway, unpinned.
func (b *benchBase) pinOwn() (redisCPUs string) {
	if b.redis.url != "" || !b.pin {
		return ""
	}
	p, err := bench.Pin()
	if err != nil {
		b.say("not pinned: %v\n", err)
		return ""
	}
	b.deferClose(p.Restore)
	b.pinned = p.String()
	b.say("pinned: %s\n", b.pinned)
	return p.RedisCPUs
}

func (f *benchFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "mode", "both", "engine (hongbao in-process), classic (one EVAL per grab), or both, one after the other; http and discount are benchmarks of their own (see --mode http -h, --mode discount -h)")
	fs.StringVar(&f.aof, "aof", "off", "persistence of our own redis-server: off, everysec or always (appendfsync); automatic AOF rewrite is off")
	fs.IntVar(&f.packets, "packets", 200000, "packets in the pool")
	fs.IntVar(&f.users, "users", 200000, "users u1..uN; each grabs once")
	fs.StringVar(&f.total, "total", "", "amount to hand out, a decimal with at most two places; default 1.00 per packet")
	fs.StringVar(&f.split, "split", "double-average", "split algorithm: double-average, line-cut or fixed")
	fs.Uint64Var(&f.seed, "seed", 20261122, "split seed: the same packets in every run and both modes")
	fs.IntVar(&f.concurrency, "concurrency", 256, "users grabbing at once through the engine (goroutines)")
	fs.IntVar(&f.classic, "classic-workers", 20, "workers of the classic design (one blocking connection each); 20 is the design as teams run it")
	fs.IntVar(&f.runs, "runs", 3, "runs per measurement; the run with the median grants/s is reported (a sweep defaults to 1)")
	fs.StringVar(&f.sweep, "sweep", "", "comma-separated concurrencies: measure both designs at each (e.g. 16,32,64,128,256,512,1024)")
	fs.StringVar(&f.svg, "svg", "", "with --sweep: write the plot (throughput and p99 against concurrency) to this SVG file")
	fs.IntVar(&f.replicas, "replicas", 0, "replicas of our own redis-server per run (loopback, no persistence), for --wait-replicas")
	fs.IntVar(&f.waitN, "wait-replicas", 0, "the engine waits after each batch until this many replicas hold it (WAIT); 0: no waiting")
	fs.DurationVar(&f.waitTimeout, "wait-timeout", 500*time.Millisecond, "how long each WAIT may take")
	fs.IntVar(&f.shards, "shards", 1, "spread the engine's campaign over this many shards (1 to 256)")
	fs.Float64Var(&f.skew, "skew", 0, "share of the users (0 to 1) homed on shard 0, so that shard borrows from the others (needs --shards 2 or more)")
	fs.BoolVar(&f.scriptTimes, "script-times", false, "sum the time Redis spends in each script (its slow log, threshold 0, during the grabs); needs our own redis-server")
}

const benchUsage = `Usage: hongbao bench [flags]

Loads the same packets (split with --seed) for hongbao's engine and for the
classic design (a JSON list, one EVAL of the full script per grab, one
blocking connection per worker), lets --concurrency users grab at once through the engine, and the classic
design's --classic-workers (20, as it is run) until every user has grabbed
once (the classic: until the pool is empty), and reports
GRANTED answers per second of the grab phase, latency percentiles, Redis CPU
per grant, memory per packet and per grant, and the invariant checks.

Every flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_PACKETS=1000.

Flags:`

// parseFlags checks everything before anything starts.
func (b *benchDesignsCmd) parseFlags(args []string) error {
	fs, err := b.parseCommand("bench", benchUsage, args, b.declareCommon, b.f.declare)
	if err != nil {
		return err
	}
	b.set = given(fs)
	for _, check := range []func() error{b.checkModes, b.checkSizes, b.checkSweep} {
		if err := check(); err != nil {
			return err
		}
	}
	if err := b.o.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// checkModes checks the designs to measure and where.
func (b *benchDesignsCmd) checkModes() error {
	f := &b.f
	switch f.mode {
	case "both":
		b.modes = []bench.Mode{bench.Engine, bench.Classic}
	case "engine", "classic":
		b.modes = []bench.Mode{bench.Mode(f.mode)}
	default:
		return usageErrorf("--mode must be engine, classic or both, not %q", f.mode)
	}
	switch f.aof {
	case "off", "everysec", "always":
	default:
		return usageErrorf("--aof must be off, everysec or always, not %q", f.aof)
	}
	if b.redis.url == "" && f.waitN > f.replicas {
		return usageErrorf("--wait-replicas %d needs as many replicas of bench's own redis-server: --replicas %d", f.waitN, f.waitN)
	}
	if b.redis.url != "" && b.set["replicas"] {
		return usageErrorf("--replicas starts replicas of bench's own redis-server; give the replicas of the server given with --redis there")
	}
	if b.redis.url != "" && b.set["aof"] {
		return usageErrorf("--aof applies only when bench starts its own redis-server; set the persistence of the server given with --redis there")
	}
	if f.classic < 1 {
		return usageErrorf("--classic-workers must be at least 1, not %d", f.classic)
	}
	if f.mode == "classic" && b.set["concurrency"] && !b.set["classic-workers"] {
		return usageErrorf("--concurrency sets the engine's users in flight; the classic design's workers are --classic-workers")
	}
	return nil
}

// checkSizes fills the options from the flags that size the runs.
func (b *benchDesignsCmd) checkSizes() error {
	f := &b.f
	url, err := b.redis.target()
	if err != nil {
		return err
	}
	b.o = bench.Options{
		Packets: f.packets, Users: f.users, Seed: f.seed, Concurrency: f.concurrency, Runs: f.runs,
		RedisURL: url, RedisServer: b.redis.server, AOF: f.aof, MaxBatch: b.maxBatch,
		Replicas: f.replicas, WaitReplicas: f.waitN, WaitTimeout: f.waitTimeout,
		Shards: f.shards, Skew: f.skew, ScriptTimes: f.scriptTimes,
		Progress: b.progress,
	}
	if f.runs < 1 {
		return usageErrorf("--runs must be at least 1, not %d", f.runs)
	}
	if b.maxBatch < 0 || b.maxBatch > 3000 {
		return usageErrorf("--max-batch must be within 0..3000")
	}
	b.o.Total = int64(f.packets) * 100
	if f.total != "" {
		t, err := centsFlag("total", f.total)
		if err != nil {
			return err
		}
		b.o.Total = t
	}
	alg, err := splitFlag(f.split)
	if err != nil {
		return err
	}
	b.o.Split = alg
	return nil
}

// checkSweep reads --sweep, and refuses the flags a sweep sets itself.
func (b *benchDesignsCmd) checkSweep() error {
	f := &b.f
	if f.sweep == "" {
		if f.svg != "" {
			return usageErrorf("--svg needs --sweep")
		}
		return nil
	}
	for _, s := range strings.Split(f.sweep, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			return usageErrorf("--sweep wants concurrencies of at least 1, comma-separated, not %q", s)
		}
		b.levels = append(b.levels, c)
	}
	if f.mode != "both" && b.set["mode"] {
		return usageErrorf("--sweep runs both modes; leave --mode out")
	}
	if b.set["concurrency"] || b.set["classic-workers"] {
		return usageErrorf("--sweep runs both designs at each of its concurrencies; leave --concurrency and --classic-workers out")
	}
	if !b.set["runs"] && b.env.Getenv("HONGBAO_RUNS") == "" {
		b.o.Runs = 1
	}
	return nil
}

// open checks that the runs can start and write their plot, says what
// will run, and pins Redis and the bench to CPUs of their own when it
// starts its own Redis.
func (b *benchDesignsCmd) open(context.Context) error {
	f, o := &b.f, &b.o
	if err := b.redis.needServer(); err != nil {
		return err
	}
	if f.svg != "" {
		// Fail now, not after a long sweep, when the file cannot be written.
		if err := os.MkdirAll(filepath.Dir(f.svg), 0o755); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
	}
	where := "a fresh private redis-server per run (loopback, AOF " + f.aof + ", automatic AOF rewrite off)"
	if f.replicas > 0 {
		where += fmt.Sprintf(", with %d replica(s)", f.replicas)
	}
	if f.waitN > 0 {
		where += fmt.Sprintf("; the engine waits for %d replica(s) after each batch (WAIT, timeout %s)", f.waitN, f.waitTimeout)
	}
	if b.redis.url != "" {
		where = "the given Redis " + b.redis.url + " (shared by every run; Redis CPU per grant is unreliable there)"
	}
	runs := "1 run per measurement"
	if o.Runs > 1 {
		runs = fmt.Sprintf("%d runs per measurement, the median reported", o.Runs)
	}
	b.say("hongbao bench: %d packets (%s, %s, seed %d), %d users, %s\nRedis: %s\n",
		o.Packets, hongbao.FormatCents(o.Total), o.Split, o.Seed, o.Users, runs, where)
	o.RedisCPUs = b.pinOwn()
	return nil
}

func (b *benchDesignsCmd) run(ctx context.Context) error {
	if b.levels != nil {
		return b.runSweep(ctx)
	}
	var results []*bench.Result
	for _, m := range b.modes {
		mo := b.o
		if m == bench.Classic {
			mo.Concurrency = b.f.classic
		}
		r, err := bench.Run(ctx, m, mo)
		if err != nil {
			return err
		}
		results = append(results, r)
		if !b.json {
			printBenchResult(b.env.Stdout, r)
		}
	}
	return b.report(results)
}

// report prints the results of the modes (or their JSON) and turns a
// failed check into the exit status.
func (b *benchDesignsCmd) report(results []*bench.Result) error {
	out := b.env.Stdout
	if b.json {
		var v any = benchSingle{Result: results[0], Pinned: b.pinned}
		if len(results) == 2 {
			v = benchPair{Engine: results[0], Classic: results[1], Ratio: bench.Ratio(results[0], results[1]), Pinned: b.pinned}
		}
		if err := json.NewEncoder(out).Encode(v); err != nil {
			return err
		}
	} else if len(results) == 2 {
		fmt.Fprintf(out, "\nengine (%d users in flight) / classic (%d workers) grants/s: %.2fx  (%.0f / %.0f)\n",
			results[0].Concurrency, results[1].Concurrency,
			bench.Ratio(results[0], results[1]), results[0].GrantsPerSec, results[1].GrantsPerSec)
	}
	for _, r := range results {
		if !r.OK {
			return &exitError{code: 1, err: errors.New("invariant check FAILED")}
		}
	}
	return nil
}

// runSweep measures both designs at each concurrency of --sweep.
func (b *benchDesignsCmd) runSweep(ctx context.Context) error {
	b.say("sweep over concurrency %v, both designs\n", b.levels)
	points, err := bench.Sweep(ctx, b.o, b.levels, func(p bench.SweepPoint) {
		b.say("  concurrency %5d: engine %9.0f grants/s p99 %7.2f ms | classic %9.0f grants/s p99 %7.2f ms | %.2fx\n",
			p.Concurrency, p.Engine.GrantsPerSec, p.Engine.P99Ms, p.Classic.GrantsPerSec, p.Classic.P99Ms, p.Ratio)
	})
	if err != nil {
		return err
	}
	if b.f.svg != "" {
		if err := b.writeSVG(points); err != nil {
			return err
		}
	}
	if b.json {
		if err := json.NewEncoder(b.env.Stdout).Encode(benchSweep{Sweep: points, Pinned: b.pinned}); err != nil {
			return err
		}
	} else {
		b.printSweep(points)
	}
	for _, p := range points {
		if !p.Engine.OK || !p.Classic.OK {
			return &exitError{code: 1, err: errors.New("invariant check FAILED")}
		}
	}
	return nil
}

// writeSVG writes the sweep's plot to --svg.
func (b *benchDesignsCmd) writeSVG(points []bench.SweepPoint) error {
	o := &b.o
	title := fmt.Sprintf("hongbao engine vs classic EVAL-per-grab, AOF %s", points[0].Engine.AOF)
	sub := fmt.Sprintf("%d packets, %d users, median of %d run(s) per point, %s", o.Packets, o.Users, o.Runs, redisWords(points[0].Engine.Redis))
	if b.pinned != "" {
		sub += "; " + b.pinned
	}
	fh, err := os.Create(b.f.svg)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	werr := bench.WriteSVG(fh, title, sub, points)
	if cerr := fh.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("--svg: %w", werr)
	}
	return nil
}

// printSweep prints the sweep's table and its failed checks.
func (b *benchDesignsCmd) printSweep(points []bench.SweepPoint) {
	out := b.env.Stdout
	printSweepTable(out, points)
	if b.f.svg != "" {
		fmt.Fprintf(out, "\nplot written to %s\n", b.f.svg)
	}
	for _, p := range points {
		for _, r := range []*bench.Result{p.Engine, p.Classic} {
			if !r.OK {
				fmt.Fprintf(out, "FAILED: %s at concurrency %d: %s\n", r.Mode, p.Concurrency, strings.Join(r.Problems, "; "))
			}
		}
	}
}

func printSweepTable(w io.Writer, points []bench.SweepPoint) {
	fmt.Fprintln(w, "\n| concurrency | engine grants/s | classic grants/s | ratio | engine p99 ms | classic p99 ms | engine Redis µs/grant | classic Redis µs/grant | engine mean batch | ok |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
	for _, p := range points {
		e, c := p.Engine, p.Classic
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.2fx | %.2f | %.2f | %.2f | %.2f | %.1f | %s |\n",
			p.Concurrency, e.GrantsPerSec, c.GrantsPerSec, p.Ratio, e.P99Ms, c.P99Ms,
			e.RedisUsPerGrant, c.RedisUsPerGrant, e.MeanBatch, okWord(e.OK && c.OK))
	}
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAILED"
}

func printBenchResult(w io.Writer, r *bench.Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\n%s  (concurrency %d, AOF %s, replicas %d, WAIT for %d, the median of %d by grants/s)\n",
		r.Mode, r.Concurrency, r.AOF, r.Replicas, r.WaitReplicas, r.Runs)
	p("  grants/s          %12.0f  (%d GRANTED in %.3f s; every run: %v)\n", r.GrantsPerSec, r.Granted, r.Seconds, r.RunsPerSec)
	p("  grab calls        %12d  (%.0f/s; %d without a packet", r.Grabs, r.GrabsPerSec, r.SoldOut)
	if r.Busy > 0 {
		p(", %d shed with ErrBusy", r.Busy)
	}
	p(")\n")
	p("  latency ms        p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	cpuNote := ""
	if !r.RedisCPUReliable {
		cpuNote = "  (shared Redis: unreliable)"
	}
	p("  Redis CPU         %12.2f µs per grant (%.3f s in the grab phase)%s\n", r.RedisUsPerGrant, r.RedisCPUSeconds, cpuNote)
	p("  bench CPU         %12.2f µs per grant (this process, GOMAXPROCS %d)\n", r.BenchUsPerGrant, r.GoMaxProcs)
	p("  script calls      %12d  (mean batch %.2f)\n", r.Batches, r.MeanBatch)
	if r.Shards > 1 {
		p("  shards            %12d  (%d transfers moved %d packets)\n", r.Shards, r.Transfers, r.PacketsMoved)
	}
	if len(r.ScriptMs) > 0 {
		p("  script time       %s\n", scriptTimes(r.ScriptMs))
	}
	var bars []string
	for _, b := range r.BatchSizes {
		if b.Count > 0 {
			bars = append(bars, fmt.Sprintf("<=%d: %d", b.Max, b.Count))
		}
	}
	p("  batch sizes       %s\n", strings.Join(bars, " | "))
	p("  Redis memory      %.1f bytes per pooled packet, %.1f bytes per grant\n", r.BytesPerPooledPacket, r.BytesPerGrant)
	p("  peak RSS          %.1f MB through the grab phase, %.1f MB after the invariant checks (this process, the highest of the runs)\n", r.PeakRSSMB, r.PeakRSSChecksMB)
	for _, n := range r.Notes {
		p("  note: %s\n", n)
	}
	printVerdict(w, r.OK, "  invariants        OK", "  invariants        FAILED", r.Problems)
}

// scriptTimes lists the time per script, the most first, with shares.
func scriptTimes(ms map[string]float64) string {
	names := make([]string, 0, len(ms))
	var sum float64
	for n, v := range ms {
		names = append(names, n)
		sum += v
	}
	sort.Slice(names, func(i, j int) bool { return ms[names[i]] > ms[names[j]] })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.1f ms (%.1f%%)", n, ms[n], 100*ms[n]/max(sum, 1e-9))
	}
	return strings.Join(parts, ", ")
}

func redisWords(kind string) string {
	if kind == "own" {
		return "a fresh redis-server per run"
	}
	return "a shared Redis"
}
