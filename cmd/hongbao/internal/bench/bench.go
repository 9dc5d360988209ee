// Package bench measures the engine against the classic hand-written red
// packet script, on the same packets and the same users, and draws the
// results. The `hongbao bench` command is its front end.
//
// A run loads a pool, then lets Concurrency workers grab until every user
// has grabbed once (engine) or the pool is empty (classic), and measures
// only that grab phase: GRANTED answers per second, the latency of each
// grab call (kept per worker, merged into one HDR histogram), the Redis CPU
// spent (INFO cpu before and after) per grant, and the memory Redis holds
// per pooled packet and per grant. Every run ends with the invariant checks
// of its design; a failed check makes the result not OK, it is never
// ignored.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/random"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/split"
)

// Mode is the design under test.
type Mode string

// The designs.
const (
	// Engine is hongbao's Engine in this process: Concurrency goroutines
	// call Engine.Grab, which coalesces them into batch calls of grab.lua.
	Engine Mode = "engine"
	// Classic is the hand-written design most teams start from: one EVAL of
	// the full script text per grab, one blocking connection per worker.
	Classic Mode = "classic"
)

// Options configure a benchmark. Zero fields are errors unless documented
// otherwise; the command line fills them.
type Options struct {
	Packets     int
	Users       int
	Total       int64 // cents
	Split       split.Algorithm
	Seed        uint64
	Concurrency int
	// Runs is how many times each measurement is repeated; the run with
	// the median grants/s is reported. Default 1.
	Runs int
	// RedisURL is the Redis every run uses. Empty: each run starts a fresh
	// redis-server of its own (loopback, automatic AOF rewrite off).
	RedisURL string
	// RedisServer is the redis-server binary; default from PATH.
	RedisServer string
	// AOF is the persistence of our own servers: off, everysec or always.
	AOF string
	// RedisCPUs pins our own servers to these CPUs (taskset); empty: no
	// pinning. See Pin.
	RedisCPUs string
	// MaxBatch is the engine's Config.MaxBatch; 0 means its default.
	MaxBatch int
	// Replicas is how many replicas of its own server each run starts
	// (loopback, no persistence, unpinned): what WaitReplicas waits for.
	// Not with RedisURL. Default 0.
	Replicas int
	// WaitReplicas and WaitTimeout are the engine's Config.WaitReplicas
	// and WaitTimeout: each batch waits for that many replicas (engine
	// mode only; the classic design has no such step). Default 0.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Shards spreads the engine's campaign over this many shards; 0 or 1:
	// one. The classic design has no shards.
	Shards int
	// Skew is the share of the users (0 to 1) homed on shard 0 of the
	// engine's campaign: with 0 the users are u1..uN, homed evenly; with
	// 0.5 half of them are homed on shard 0, so that shard borrows from
	// the others all the time (it needs Shards > 1).
	Skew float64
	// ScriptTimes asks our own Redis for the time each script call took
	// (the slow log, with a threshold of 0 while the grabs run), summed by
	// script: it tells the transfers' share of the scripts' time.
	ScriptTimes bool

	names []string // the users' ids with a skew (see user)
	// Progress, if not nil, starts a progress bar for a long phase.
	Progress func(label string, total int64) Progress
}

// Progress is a progress bar.
type Progress interface {
	Add(n int64)
	Set(n int64)
	Done()
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Packets < 1:
		return fmt.Errorf("packets must be at least 1, not %d", o.Packets)
	case o.Packets > split.MaxCount:
		return fmt.Errorf("packets must be at most %d", split.MaxCount)
	case o.Users < 1:
		return fmt.Errorf("users must be at least 1, not %d", o.Users)
	case o.Users > math.MaxInt32-1:
		return fmt.Errorf("users must be below %d", math.MaxInt32)
	case o.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, not %d", o.Concurrency)
	case o.Runs < 0:
		return fmt.Errorf("runs must not be negative")
	case o.Replicas < 0 || o.Replicas > 8:
		return fmt.Errorf("replicas must be within 0..8, not %d", o.Replicas)
	case o.Replicas > 0 && o.RedisURL != "":
		return fmt.Errorf("replicas are started only for a Redis of our own, not with a given Redis")
	case o.WaitReplicas < 0 || o.WaitTimeout < 0:
		return fmt.Errorf("wait replicas and wait timeout must not be negative")
	case o.Shards < 0 || o.Shards > hongbao.MaxShards || o.Shards > o.Packets:
		return fmt.Errorf("shards must be within 1 and %d, and at most the packets", hongbao.MaxShards)
	case o.Skew < 0 || o.Skew > 1 || (o.Skew > 0 && o.Shards < 2):
		return fmt.Errorf("skew must be within 0 and 1, and needs shards above 1")
	case o.ScriptTimes && o.RedisURL != "":
		return fmt.Errorf("script times need a Redis of our own, not --redis")
	}
	switch o.AOF {
	case "", "off", "everysec", "always":
	default:
		return fmt.Errorf("aof must be off, everysec or always, not %q", o.AOF)
	}
	_, err := split.Spec{Total: o.Total, Count: o.Packets, Algorithm: o.Split}.Normalize()
	return err
}

// BatchBucket is one bar of a batch size distribution: batches of more
// than the previous bucket's Max and at most Max grabs.
type BatchBucket struct {
	Max   int    `json:"max"`
	Count uint64 `json:"count"`
}

// Result is one measurement: the median of Runs runs of one design.
type Result struct {
	Mode        Mode   `json:"mode"`
	Packets     int    `json:"packets"`
	Users       int    `json:"users"`
	TotalCents  int64  `json:"total_cents"`
	Concurrency int    `json:"concurrency"`
	Runs        int    `json:"runs"`
	Redis       string `json:"redis"` // "own" (a fresh server per run) or "given"
	// Replicas is the replicas of our own server; WaitReplicas what each
	// batch of the engine waited for (0: no WAIT).
	Replicas     int `json:"replicas"`
	WaitReplicas int `json:"wait_replicas"`
	// AOF is the persistence the server had: off, everysec, always, no, or
	// unknown when CONFIG GET is not allowed.
	AOF string `json:"aof"`

	// The figures of the median run (by grants/s).
	Grabs   int64 `json:"grabs"`   // grab calls answered
	Granted int64 `json:"granted"` // GRANTED answers
	// SoldOut counts answers without a packet (the classic script answers
	// nil; the engine SOLD_OUT); Busy counts ErrBusy (engine only).
	SoldOut int64 `json:"sold_out"`
	Busy    int64 `json:"busy"`
	// Unknown counts answers lost or unconfirmed (ErrOutcomeUnknown: a
	// WAIT that timed out, engine only), each retried for the same user.
	Unknown int64   `json:"outcome_unknown"`
	Seconds float64 `json:"seconds"` // the grab phase only
	// GrantsPerSec is the headline: GRANTED answers per second of the grab
	// phase. GrabsPerSec counts every answered grab call.
	GrantsPerSec float64   `json:"grants_per_sec"`
	GrabsPerSec  float64   `json:"grabs_per_sec"`
	RunsPerSec   []float64 `json:"runs_grants_per_sec"` // every run, in order
	P50Ms        float64   `json:"p50_ms"`
	P90Ms        float64   `json:"p90_ms"`
	P99Ms        float64   `json:"p99_ms"`
	P999Ms       float64   `json:"p999_ms"`
	MaxMs        float64   `json:"max_ms"`
	// RedisUsPerGrant is the Redis CPU (used_cpu_user + used_cpu_sys)
	// spent in the grab phase per GRANTED answer, in microseconds. It is
	// exact only when nothing else uses that Redis (RedisCPUReliable).
	RedisUsPerGrant  float64 `json:"redis_us_per_grab"`
	RedisCPUSeconds  float64 `json:"redis_cpu_seconds"`
	RedisCPUReliable bool    `json:"redis_cpu_reliable"`
	// Shards is the engine's shard count; Transfers and PacketsMoved what
	// its refills moved between shards in the median run.
	Shards       int    `json:"shards,omitempty"`
	Transfers    uint64 `json:"transfers,omitempty"`
	PacketsMoved uint64 `json:"packets_moved,omitempty"`
	// ScriptMs is the time Redis spent running each script in the median
	// run's grab phase, by script name, in ms (with ScriptTimes).
	ScriptMs map[string]float64 `json:"script_ms,omitempty"`
	// BenchUsPerGrant is this process's CPU (user + system) in the grab
	// phase per GRANTED answer, in microseconds: the client's side of the
	// cost. GoMaxProcs is the Go scheduler's parallelism during the run.
	BenchUsPerGrant float64 `json:"bench_us_per_grab"`
	GoMaxProcs      int     `json:"gomaxprocs"`
	// Batches counts script calls; BatchSizes is their size distribution
	// (the classic design always sends batches of one).
	Batches    uint64        `json:"batches"`
	MeanBatch  float64       `json:"mean_batch"`
	BatchSizes []BatchBucket `json:"batch_sizes"`
	// Memory: MEMORY USAGE ... SAMPLES 0 of the pool after the load, over
	// the packets; of what the grants left behind (engine: claims hash +
	// grants stream; classic: consumed list + dedupe hash), over the
	// grants.
	BytesPerPooledPacket float64 `json:"redis_bytes_per_pooled_packet"`
	BytesPerGrant        float64 `json:"redis_bytes_per_grant"`
	// PeakRSSMB is this process's peak RSS (VmHWM) in a run up to the end
	// of its grab phase: load and grabs. PeakRSSChecksMB is the peak at the
	// end of the run, after the invariant checks, which hold every grant in
	// memory (the engine's Audit builds maps of all users and packets). The
	// peak is reset before every run (where Linux allows it), so a run does
	// not inherit the peak of the one before; the highest over the runs is
	// reported.
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	PeakRSSChecksMB float64 `json:"peak_rss_mb_after_checks"`

	// OK is false when any invariant check of any run failed.
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// runStats is what one run measured.
type runStats struct {
	grabs, granted, soldOut, busy int64
	unknown                       int64
	seconds                       float64
	hist                          *hdrhistogram.Histogram
	cpuSeconds, benchCPUSeconds   float64
	gomaxprocs                    int
	peakRSS, peakRSSChecks        float64 // MiB
	pooledBytes, grantBytes       int64
	batches, carried              uint64 // script calls, grabs they carried
	sizes                         []BatchBucket
	transfers, moved              uint64
	scriptMs                      map[string]float64
	problems                      []string
}

// Run measures design mode: Runs runs, each on a fresh Redis of its own
// (or on the given one, with keys of its own), and reports the run with
// the median grants/s.
func Run(ctx context.Context, mode Mode, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if mode != Engine && mode != Classic {
		return nil, fmt.Errorf("bench: unknown mode %q", mode)
	}
	if o.Runs == 0 {
		o.Runs = 1
	}
	sp, err := split.Spec{Total: o.Total, Count: o.Packets, Algorithm: o.Split}.Normalize()
	if err != nil {
		return nil, err
	}
	o.Split = sp.Algorithm
	amounts, err := split.Split(sp, o.Seed)
	if err != nil {
		return nil, err
	}
	if o.Skew > 0 {
		o.names = skewedNames(o.Users, o.Shards, o.Skew)
	}
	var runs []*runStats
	aof := ""
	for i := 0; i < o.Runs; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		resetPeakRSS()
		t, err := openTarget(ctx, o)
		if err != nil {
			return nil, err
		}
		aof = t.aof(ctx)
		label := fmt.Sprintf("%s %d/%d", mode, i+1, o.Runs)
		var rs *runStats
		if mode == Engine {
			rs, err = runEngine(ctx, t, o, amounts, label)
		} else {
			rs, err = runClassic(ctx, t, o, amounts, label)
		}
		t.close()
		if err != nil {
			return nil, fmt.Errorf("%s run %d: %w", mode, i+1, err)
		}
		runs = append(runs, rs)
	}
	return summarize(mode, o, aof, runs), nil
}

// grabPhase is the measured part of a run: it reads Redis's CPU, opens
// start to the workers (who wait on it), waits for them, and records the
// wall clock, Redis's CPU, this process's CPU and its peak RSS in rs. When
// Redis's CPU cannot be read first, abort tells the workers to stop and
// nothing is measured. The caller checks its workers' own errors after.
func grabPhase(ctx context.Context, t *target, rs *runStats, start chan struct{}, wg *sync.WaitGroup, bar Progress, abort func()) error {
	cpu0, err := t.cpuSeconds(ctx)
	if err != nil {
		abort()
		close(start)
		wg.Wait()
		bar.Done()
		return err
	}
	rs.gomaxprocs = runtime.GOMAXPROCS(0)
	if err := t.startScriptTimes(ctx); err != nil {
		abort()
		close(start)
		wg.Wait()
		bar.Done()
		return err
	}
	b0, t0 := processCPU(), time.Now()
	close(start)
	wg.Wait()
	rs.seconds = time.Since(t0).Seconds()
	rs.benchCPUSeconds = processCPU() - b0
	rs.peakRSS = PeakRSSMB()
	bar.Done()
	if err := ctx.Err(); err != nil {
		return err
	}
	cpu1, err := t.cpuSeconds(ctx)
	if err != nil {
		return err
	}
	rs.cpuSeconds = cpu1 - cpu0
	rs.scriptMs, err = t.scriptTimes(ctx)
	return err
}

// summarize picks the median run (the lower one of the middle two for an
// even count) and fills a Result from it. Problems of every run count.
func summarize(mode Mode, o Options, aof string, runs []*runStats) *Result {
	r := &Result{
		Mode: mode, Packets: o.Packets, Users: o.Users, TotalCents: o.Total, Concurrency: o.Concurrency,
		Runs: len(runs), Redis: "own", AOF: aof, RedisCPUReliable: o.RedisURL == "",
		Replicas: o.Replicas,
	}
	if mode == Engine {
		r.WaitReplicas = o.WaitReplicas
	}
	if o.RedisURL != "" {
		r.Redis = "given"
		r.Notes = append(r.Notes, "--redis given: Redis CPU per grant counts whatever else that server did meanwhile; it is reliable only on a Redis of our own")
	}
	perSec := func(s *runStats) float64 { return perSecond(s.granted, s.seconds) }
	var m *runStats
	r.RunsPerSec, r.Problems, m = medianRun(runs, perSec, func(s *runStats) []string { return s.problems })
	r.OK = len(r.Problems) == 0

	r.Grabs, r.Granted, r.SoldOut, r.Busy, r.Unknown = m.grabs, m.granted, m.soldOut, m.busy, m.unknown
	r.Seconds = round(m.seconds, 4)
	r.GrantsPerSec = round(perSec(m), 1)
	r.GrabsPerSec = round(perSecond(m.grabs, m.seconds), 1)
	ms := func(q float64) float64 { return round(float64(m.hist.ValueAtQuantile(q))/1000, 3) }
	r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms = ms(50), ms(90), ms(99), ms(99.9)
	r.MaxMs = round(float64(m.hist.Max())/1000, 3)
	r.RedisCPUSeconds = round(m.cpuSeconds, 4)
	if m.granted > 0 {
		r.RedisUsPerGrant = round(m.cpuSeconds*1e6/float64(m.granted), 3)
		r.BenchUsPerGrant = round(m.benchCPUSeconds*1e6/float64(m.granted), 3)
		r.BytesPerGrant = round(float64(m.grantBytes)/float64(m.granted), 1)
	}
	r.BytesPerPooledPacket = round(float64(m.pooledBytes)/float64(o.Packets), 1)
	r.Batches, r.BatchSizes = m.batches, m.sizes
	r.Transfers, r.PacketsMoved, r.ScriptMs = m.transfers, m.moved, m.scriptMs
	if mode == Engine {
		r.Shards = max(o.Shards, 1)
	}
	r.GoMaxProcs = m.gomaxprocs
	if m.batches > 0 {
		r.MeanBatch = round(float64(m.carried)/float64(m.batches), 2)
	}
	for _, s := range runs {
		r.PeakRSSMB = max(r.PeakRSSMB, round(s.peakRSS, 1))
		r.PeakRSSChecksMB = max(r.PeakRSSChecksMB, round(s.peakRSSChecks, 1))
	}
	return r
}

// medianRun reads the runs of a measurement as every benchmark reports
// them: each run's rate (rounded), the problems of all runs (at most 20,
// each naming its run) and the median run by rate, the lower one of the
// middle two for an even count.
func medianRun[S any](runs []S, rate func(S) float64, problems func(S) []string) (rates []float64, probs []string, median S) {
	for i, s := range runs {
		rates = append(rates, round(rate(s), 1))
		for _, p := range problems(s) {
			if len(probs) < 20 {
				probs = append(probs, fmt.Sprintf("run %d: %s", i+1, p))
			}
		}
	}
	order := append([]S(nil), runs...)
	sort.SliceStable(order, func(i, j int) bool { return rate(order[i]) < rate(order[j]) })
	return rates, probs, order[(len(order)-1)/2]
}

// perSecond is n over seconds, 0 for a phase that took no time.
func perSecond(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// target is the Redis of one run.
type target struct {
	client   rueidis.Client
	addr     string
	user     string
	password string
	db       int
	shared   bool // given with --redis: other runs and clients may use it
	// scriptTimes: log every command in the slow log while grabs run.
	timeScripts bool
	runID       string
	srv         *redisserver.Server
	replicas    []*redisserver.Server
}

// openTarget connects to the given Redis (one server, or a Sentinel
// deployment: the classic design then dials the master the sentinels name
// at the start), or starts a fresh one with Replicas replicas.
func openTarget(ctx context.Context, o Options) (*target, error) {
	t := &target{runID: newRunID(), timeScripts: o.ScriptTimes}
	var opt rueidis.ClientOption
	if o.RedisURL != "" {
		url := o.RedisURL
		if !strings.Contains(url, "://") {
			url = "redis://" + url
		}
		var err error
		if opt, err = rueidis.ParseURL(url); err != nil {
			// Not the URL: it may hold the password of --redis-password-file.
			return nil, fmt.Errorf("--redis: %w", err)
		}
		t.shared = true
		t.user, t.password, t.db = opt.Username, opt.Password, opt.SelectDB
		if len(opt.InitAddress) != 1 && opt.Sentinel.MasterSet == "" {
			return nil, fmt.Errorf("--redis must name one server or a Sentinel deployment, not %d servers", len(opt.InitAddress))
		}
	} else {
		if err := t.startOwn(ctx, o); err != nil {
			t.close()
			return nil, err
		}
		opt.InitAddress = []string{t.srv.Addr}
	}
	t.addr = opt.InitAddress[0]
	if err := t.connect(ctx, opt); err != nil {
		t.close()
		return nil, err
	}
	if err := t.startReplicas(ctx, o); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// startOwn starts the run's own server; with replicas to follow, it
// serves their first sync at once.
func (t *target) startOwn(ctx context.Context, o Options) error {
	aof := o.AOF
	if aof == "" {
		aof = "off"
	}
	so := redisserver.Options{Bin: o.RedisServer, AOF: aof, NoAOFRewrite: true, CPUs: o.RedisCPUs}
	if o.Replicas > 0 {
		so.Args = []string{"--repl-diskless-sync-delay", "0"}
	}
	srv, err := redisserver.Start(ctx, so)
	t.srv = srv
	return err
}

// connect makes the run's client and checks that it answers. Through
// Sentinel, the address the classic design dials is the master's now.
func (t *target) connect(ctx context.Context, opt rueidis.ClientOption) error {
	opt.DisableCache = true
	opt.Dialer.Timeout = 3 * time.Second
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", t.addr, err)
	}
	t.client = c
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Do(pctx, c.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", t.addr, err)
	}
	if opt.Sentinel.MasterSet != "" {
		for addr := range c.Nodes() {
			t.addr = addr
		}
	}
	return nil
}

// startReplicas starts the replicas of the run's own server (no
// persistence: a replica acknowledges what it applied, not what it
// wrote to disk) and waits until each acknowledges a write.
func (t *target) startReplicas(ctx context.Context, o Options) error {
	if o.Replicas == 0 {
		return nil
	}
	host, port, _ := strings.Cut(t.srv.Addr, ":")
	for range o.Replicas {
		r, err := redisserver.Start(ctx, redisserver.Options{Bin: o.RedisServer, AOF: "off", NoAOFRewrite: true,
			Args: []string{"--replicaof", host, port}})
		if err != nil {
			return fmt.Errorf("start a replica: %w", err)
		}
		t.replicas = append(t.replicas, r)
	}
	deadline := time.Now().Add(60 * time.Second)
	for c := t.client; ; {
		res := c.DoMulti(ctx, c.B().Incr().Key("bench:replicas").Build(),
			c.B().Wait().Numreplicas(int64(o.Replicas)).Timeout(100).Build())
		if n, err := res[1].AsInt64(); err == nil && n == int64(o.Replicas) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d replicas did not catch up within a minute", o.Replicas)
		}
	}
}

func (t *target) close() {
	if t.client != nil {
		t.client.Close()
	}
	for _, r := range t.replicas {
		_ = r.Stop()
	}
	if t.srv != nil {
		_ = t.srv.Stop()
	}
}

// aof reads the server's persistence setting: off, always, everysec, no
// or unknown.
func (t *target) aof(ctx context.Context) string {
	p, err := redisstore.Persistence(ctx, t.client)
	if err != nil {
		return "unknown"
	}
	return p
}

// cpuSeconds is used_cpu_user + used_cpu_sys from INFO cpu.
func (t *target) cpuSeconds(ctx context.Context) (float64, error) {
	s, err := t.client.Do(ctx, t.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return parseCPU(s)
}

func parseCPU(info string) (float64, error) {
	var sum float64
	found := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s=%q", k, v)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, errors.New("INFO cpu: used_cpu_user or used_cpu_sys missing")
	}
	return sum, nil
}

// memoryUsage is MEMORY USAGE key SAMPLES 0 (every element counted); 0 for
// a missing key.
func (t *target) memoryUsage(ctx context.Context, keys ...string) (int64, error) {
	var sum int64
	for _, k := range keys {
		n, err := t.client.Do(ctx, t.client.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		sum += n
	}
	return sum, nil
}

func newRunID() string { return random.Hex(5) }

// processCPU is this process's CPU time so far (user + system), in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// resetPeakRSS returns the memory the last run freed to the system and
// resets VmHWM to the current RSS (Linux 4.0 and later; elsewhere the peak
// stays that of the whole process).
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakRSSMB is this process's peak resident set size (VmHWM) in MiB, or 0
// where /proc is missing.
func PeakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// Latency. Each worker keeps its own grab times (no lock, nothing shared)
// as microseconds in a slice, 4 bytes a grab, and they go into one HDR
// histogram at the end. An HDR histogram of 3 significant digits per
// worker would cost about 140 KB each: 140 MB of the RSS we report at 1024
// workers.
type latencies []uint32

// histMaxUs is the longest latency told apart: 60 s.
const histMaxUs = 60_000_000

func (l *latencies) add(d time.Duration) {
	*l = append(*l, uint32(min(max(d.Microseconds(), 1), histMaxUs)))
}

// histogramOf merges the workers' latencies into one histogram of 3
// significant digits.
func histogramOf(all []latencies) *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, histMaxUs, 3)
	for _, l := range all {
		for _, us := range l {
			_ = h.RecordValue(int64(us))
		}
	}
	return h
}

// problems collects failed checks from many goroutines.
type problems struct {
	mu   sync.Mutex
	list []string
	n    int
}

func (p *problems) add(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if len(p.list) < 20 {
		p.list = append(p.list, fmt.Sprintf(format, a...))
	}
}

func (p *problems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.list...)
	if p.n > len(p.list) {
		out = append(out, fmt.Sprintf("... and %d more", p.n-len(p.list)))
	}
	return out
}

// user is the id of simulated user i: UserName(i), or with a skew, the
// i-th of a list in which a share Skew is homed on shard 0.
func (o Options) user(i int) string {
	if o.names != nil {
		return o.names[i]
	}
	return UserName(i)
}

// skewedNames lists n user ids, share of them (spread evenly through the
// list) homed on shard 0 of shards, the rest anywhere else.
func skewedNames(n, shards int, share float64) []string {
	out := make([]string, n)
	next := 0
	fresh := func(home bool) string {
		for {
			next++
			u := "u" + strconv.Itoa(next)
			if (hongbao.HomeShard(u, shards) == 0) == home {
				return u
			}
		}
	}
	hot := 0.0
	for i := range out {
		hot += share
		if hot >= 1 {
			hot--
			out[i] = fresh(true)
		} else {
			out[i] = fresh(false)
		}
	}
	return out
}

// UserName is the id of simulated user i (0-based): u1 .. uN, in both
// designs here and in demo's rain.
func UserName(i int) string { return "u" + strconv.Itoa(i+1) }

// userRange is worker w's share of n users among c workers.
func userRange(w, c, n int) (from, to int) {
	return w * n / c, (w + 1) * n / c
}

func (o Options) progress(label string, total int64) Progress {
	if o.Progress == nil {
		return nopProgress{}
	}
	return o.Progress(label, total)
}

type nopProgress struct{}

func (nopProgress) Add(int64) {}
func (nopProgress) Set(int64) {}
func (nopProgress) Done()     {}

// startScriptTimes, with ScriptTimes, makes our own Redis log every command
// in its slow log, emptied first.
func (t *target) startScriptTimes(ctx context.Context) error {
	if !t.timeScripts {
		return nil
	}
	c := t.client
	for _, r := range c.DoMulti(ctx,
		c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").ParameterValue("slowlog-max-len", "1000000").Build(),
		c.B().SlowlogReset().Build(),
	) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("slow log: %w", err)
		}
	}
	return nil
}

// scriptTimes reads the slow log back, sums the time of each script's
// calls by name (ms), and turns the slow log off again. Only the script
// calls count: the time Redis spent running each, not reading the request
// or writing the reply.
func (t *target) scriptTimes(ctx context.Context) (map[string]float64, error) {
	if !t.timeScripts {
		return nil, nil
	}
	c := t.client
	entries, err := c.Do(ctx, c.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("slow log: %w", err)
	}
	names := redisstore.ScriptNames()
	out := map[string]float64{}
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 4 {
			continue
		}
		us, _ := f[2].AsInt64()
		args, _ := f[3].AsStrSlice()
		name := ""
		switch {
		case len(args) >= 2 && strings.EqualFold(args[0], "EVALSHA"):
			name = names[strings.ToLower(args[1])]
		case len(args) >= 1 && strings.EqualFold(args[0], "EVAL"):
			name = "EVAL (first call of a script)"
		}
		if name == "" {
			// Redis 7 also logs the commands a script runs, inside the
			// script's own time: only the scripts count.
			continue
		}
		out[name] += float64(us) / 1000
	}
	for k, v := range out {
		out[k] = round(v, 3)
	}
	err = c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "10000").Build()).Error()
	return out, err
}
