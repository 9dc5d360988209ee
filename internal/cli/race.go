package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/atomicop"
	"github.com/hongbao/hongbao/internal/random"
	"github.com/hongbao/hongbao/internal/redisserver"
)

func init() {
	register("race", "run a naive GET-then-SET and hongbao's scripts side by side, and count what each gets wrong", runRace)
}

const (
	raceUpdateMode = "update-if-newer"
	raceOnceMode   = "once"
)

type raceFlags struct {
	mode         string
	redis        string
	workers      int
	ops          int
	keys         int
	json         bool
	copies       int
	die          float64
	dieAfterPush float64
	lease        time.Duration
	seed         uint64
}

// raceUpdateSide is what one approach got wrong in update-if-newer.
type raceUpdateSide struct {
	// StaleKeys counts keys whose stored version is not the newest sent.
	StaleKeys int64 `json:"stale_keys"`
	// AggregateDrift is the sum over statuses of |summary - recount of the
	// stored records|.
	AggregateDrift int64 `json:"aggregate_drift"`
}

// raceOnceSide is what one approach got wrong in once.
type raceOnceSide struct {
	// Duplicates counts pushes beyond the first of each message, except
	// those caused by a worker dying after its push (counted apart).
	Duplicates int64 `json:"duplicates"`
	// Lost counts messages never pushed.
	Lost int64 `json:"lost"`
	// AfterPushDeaths counts workers that died after pushing and before
	// confirming (only with --die-after-push).
	AfterPushDeaths *int64 `json:"after_push_deaths,omitempty"`
	// AfterPushDuplicates counts the duplicates those deaths caused, which
	// a receiver removes by message id (only with --die-after-push).
	AfterPushDuplicates *int64 `json:"after_push_duplicates,omitempty"`
}

// raceReport is the --json output: {"naive": {...}, "hongbao": {...}}.
type raceReport[S any] struct {
	Naive   S `json:"naive"`
	Hongbao S `json:"hongbao"`
}

func raceUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, `Usage: hongbao race update-if-newer|once [flags]

Runs the naive approach and hongbao's scripts side by side, each with
--workers goroutines at the same time on the same Redis, and prints what
each got wrong, counted against ground truth kept in Go.

  update-if-newer  --ops updates of --keys device records, versions sent out
                   of order. Naive: HMGET the stored version, then HSET when
                   newer, then HINCRBY the status summary. Reports stale_keys
                   (keys whose stored version is not the newest sent) and
                   aggregate_drift (summary against a recount).
  once             --ops deliveries: --ops/--copies messages, each handed to
                   --copies workers; a worker
                   that wins a message dies with probability --die before
                   pushing (and --die-after-push after pushing), and the
                   source redelivers its copy after the lease. Naive: GET the
                   pushed mark, SET it, push. Reports duplicates and lost.

Exit status 0 when hongbao's side has no error, 1 when it has one, 2 for a
usage error. Every flag can also be set with HONGBAO_<NAME>, e.g.
HONGBAO_WORKERS=32.

Flags:`)
	fs.PrintDefaults()
}

func runRace(ctx context.Context, io *IO, args []string) error {
	var f raceFlags
	fs := newFlagSet("race", io)
	fs.StringVar(&f.redis, "redis", "", "Redis URL (redis://host:port); default: start a private redis-server")
	fs.IntVar(&f.workers, "workers", 64, "concurrent workers per approach")
	fs.IntVar(&f.ops, "ops", 200000, "update-if-newer: updates sent; once: copies of messages handed out (messages = ops/copies)")
	fs.IntVar(&f.keys, "keys", 100, "update-if-newer: device records; once: messages handed out together (their copies shuffled)")
	fs.BoolVar(&f.json, "json", false, `print {"naive": {...}, "hongbao": {...}} instead of a table`)
	fs.IntVar(&f.copies, "copies", 3, "once: workers each message is handed to")
	fs.Float64Var(&f.die, "die", 0.3, "once: probability that a worker dies after claiming, before pushing")
	fs.Float64Var(&f.dieAfterPush, "die-after-push", 0, "once: probability that a worker dies after pushing, before confirming")
	fs.DurationVar(&f.lease, "lease", 500*time.Millisecond, "once: lease of a claim; the source redelivers a dead worker's copy a little after it")
	fs.Uint64Var(&f.seed, "seed", 0, "workload seed; 0: random")
	fs.Usage = func() { raceUsage(io.Stderr, fs) }

	if len(args) == 0 {
		fs.Usage()
		return usageErrorf("want a mode: %s or %s", raceUpdateMode, raceOnceMode)
	}
	f.mode = args[0]
	switch f.mode {
	case raceUpdateMode, raceOnceMode:
	case "-h", "-help", "--help", "help":
		fs.Usage()
		return flag.ErrHelp
	default:
		fs.Usage()
		return usageErrorf("unknown mode %q: want %s or %s", f.mode, raceUpdateMode, raceOnceMode)
	}
	if err := parseFlags(fs, io, args[1:]); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.seed == 0 {
		f.seed = mrand.Uint64()
	}

	// The race measures correctness, not durability: no AOF.
	conn, err := connectRedis(ctx, io, f.redis, redisOptions{Server: redisserver.Options{AOF: "off"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	prefix := raceRunPrefix()
	if conn.Kind == "given" {
		// The server is someone else's: take our keys away afterwards.
		defer raceCleanup(context.WithoutCancel(ctx), conn.Client, prefix)
	}

	start := time.Now()
	var oursFailed bool
	switch f.mode {
	case raceUpdateMode:
		naive, ours, err := raceUpdate(ctx, conn.Client, prefix, f)
		if err != nil {
			return err
		}
		oursFailed = ours != raceUpdateSide{}
		if f.json {
			if err := json.NewEncoder(io.Stdout).Encode(raceReport[raceUpdateSide]{Naive: naive, Hongbao: ours}); err != nil {
				return err
			}
		} else {
			printRaceUpdate(io.Stdout, f, naive, ours, time.Since(start))
		}
	case raceOnceMode:
		naive, ours, err := raceOnce(ctx, conn.Client, prefix, f)
		if err != nil {
			return err
		}
		oursFailed = ours.Duplicates != 0 || ours.Lost != 0
		if f.json {
			if err := json.NewEncoder(io.Stdout).Encode(raceReport[raceOnceSide]{Naive: naive, Hongbao: ours}); err != nil {
				return err
			}
		} else {
			printRaceOnce(io.Stdout, f, naive, ours, time.Since(start))
		}
	}
	if oursFailed {
		return &exitError{code: 1, err: errors.New("hongbao's side got something wrong (see the report)")}
	}
	return nil
}

func (f *raceFlags) validate() error {
	for _, c := range []struct {
		name  string
		v, hi int
	}{
		{"workers", f.workers, 4096},
		{"ops", f.ops, 10_000_000},
		{"keys", f.keys, 1_000_000},
		{"copies", f.copies, 64},
	} {
		if c.v < 1 || c.v > c.hi {
			return usageErrorf("--%s must be in 1..%d, not %d", c.name, c.hi, c.v)
		}
	}
	// A worker dies at most 90% of the time, or a message could take
	// very many leases to get through.
	for _, p := range []struct {
		name string
		v    float64
	}{{"die", f.die}, {"die-after-push", f.dieAfterPush}} {
		if !(p.v >= 0 && p.v <= 0.9) {
			return usageErrorf("--%s must be a probability in [0, 0.9], not %v", p.name, p.v)
		}
	}
	if f.die+f.dieAfterPush > 0.9 {
		return usageErrorf("--die plus --die-after-push must be at most 0.9")
	}
	if f.lease < 10*time.Millisecond || f.lease > time.Minute {
		return usageErrorf("--lease must be in 10ms..1m, not %v", f.lease)
	}
	return nil
}

// raceRunPrefix returns a key prefix no other run uses.
func raceRunPrefix() string {
	return "hb:race:" + random.Hex(6) + ":"
}

// raceCleanup deletes the keys of a run from every node.
func raceCleanup(ctx context.Context, c rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, n := range c.Nodes() {
		var cursor uint64
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				break
			}
			// One key per command, pipelined: in a cluster the keys of a
			// node span many slots.
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, n.B().Unlink().Key(k).Build())
			}
			if len(cmds) > 0 {
				n.DoMulti(ctx, cmds...)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// raceFirstError keeps the first error of many goroutines and cancels the
// others.
type raceFirstError struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (e *raceFirstError) set(err error) {
	e.once.Do(func() { e.err = err; e.cancel() })
}

// ---- update if newer ------------------------------------------------------

var raceStatuses = []string{"online", "offline", "charging", "idle", "error"}

const (
	raceSummary = "by-status"
	// raceBaseVersion makes versions look like event times in ms.
	raceBaseVersion = 1_700_000_000_000
)

type raceUpdateOp struct {
	key     int32
	status  int32
	version int64
}

// raceUpdateWorkload returns the updates in the order they are sent: each
// has a version one above the one generated before it, but they are sent
// shuffled within windows, as data that takes different paths arrives.
func raceUpdateWorkload(f raceFlags) []raceUpdateOp {
	rng := mrand.New(mrand.NewPCG(f.seed, 1))
	ops := make([]raceUpdateOp, f.ops)
	for i := range ops {
		ops[i] = raceUpdateOp{key: int32(rng.IntN(f.keys)), status: int32(rng.IntN(len(raceStatuses))), version: raceBaseVersion + int64(i)}
	}
	const window = 256
	for lo := 0; lo < len(ops); lo += window {
		w := ops[lo:min(lo+window, len(ops))]
		rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	return ops
}

// raceDevice names record k. All records share the hash tag {devices}, so
// they and their summary live in one slot.
func raceDevice(k int) string { return "{devices}dev-" + strconv.Itoa(k) }

// raceNaiveUpdater is update-if-newer as usually first written: read the
// stored version, write when newer, then move the summary count. Each step
// is atomic; the sequence is not.
type raceNaiveUpdater struct {
	c      rueidis.Client
	prefix string
}

func (n raceNaiveUpdater) recordKey(k int) string { return n.prefix + raceDevice(k) }
func (n raceNaiveUpdater) summaryKey() string     { return n.prefix + "{devices}:" + raceSummary }

func (n raceNaiveUpdater) update(ctx context.Context, op raceUpdateOp) error {
	key := n.recordKey(int(op.key))
	vals, err := n.c.Do(ctx, n.c.B().Hmget().Key(key).Field(atomicop.VersionField, "status").Build()).ToArray()
	if err != nil {
		return err
	}
	if len(vals) != 2 {
		return fmt.Errorf("naive update: HMGET answered %d values", len(vals))
	}
	if stored, err := vals[0].AsInt64(); err == nil && op.version <= stored {
		return nil
	}
	old, _ := vals[1].ToString()
	status := raceStatuses[op.status]
	ver := strconv.FormatInt(op.version, 10)
	if err := n.c.Do(ctx, n.c.B().Hset().Key(key).FieldValue().FieldValue(atomicop.VersionField, ver).FieldValue("status", status).FieldValue("seen", ver).Build()).Error(); err != nil {
		return err
	}
	if old == status {
		return nil
	}
	if old != "" {
		if err := n.c.Do(ctx, n.c.B().Hincrby().Key(n.summaryKey()).Field(old).Increment(-1).Build()).Error(); err != nil {
			return err
		}
	}
	return n.c.Do(ctx, n.c.B().Hincrby().Key(n.summaryKey()).Field(status).Increment(1).Build()).Error()
}

// raceUpdate runs both approaches at once over the same workload and
// counts their errors.
func raceUpdate(ctx context.Context, c rueidis.Client, prefix string, f raceFlags) (naive, ours raceUpdateSide, err error) {
	ops := raceUpdateWorkload(f)
	maxSent := make([]int64, f.keys)
	for i := range maxSent {
		maxSent[i] = -1
	}
	for _, op := range ops {
		maxSent[op.key] = max(maxSent[op.key], op.version)
	}

	nv := raceNaiveUpdater{c: c, prefix: prefix + "naive:"}
	v, err := atomicop.NewVersioned(c, &atomicop.VersionedConfig{Prefix: prefix + "hongbao:"})
	if err != nil {
		return naive, ours, err
	}
	agg := &atomicop.Aggregate{Summary: raceSummary, Field: "status"}
	sides := []func(context.Context, raceUpdateOp) error{
		nv.update,
		func(ctx context.Context, op raceUpdateOp) error {
			ver := strconv.FormatInt(op.version, 10)
			_, err := v.Update(ctx, atomicop.Update{
				Key: raceDevice(int(op.key)), Version: op.version, Aggregate: agg,
				Fields: map[string]string{"status": raceStatuses[op.status], "seen": ver},
			})
			return err
		},
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &raceFirstError{cancel: cancel}
	var wg sync.WaitGroup
	for _, apply := range sides {
		var next atomic.Int64
		for range f.workers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(len(ops)) || rctx.Err() != nil {
						return
					}
					if err := apply(rctx, ops[i]); err != nil {
						fail.set(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if fail.err != nil {
		return naive, ours, fmt.Errorf("update-if-newer: %w", fail.err)
	}
	if err := ctx.Err(); err != nil {
		return naive, ours, err
	}

	// Naive side: read the records and the summary back.
	naive, err = raceUpdateErrors(f.keys, maxSent,
		func(k int) (int64, string, bool, error) {
			m, err := c.Do(ctx, c.B().Hgetall().Key(nv.recordKey(k)).Build()).AsStrMap()
			if err != nil || m[atomicop.VersionField] == "" {
				return 0, "", false, err
			}
			ver, err := strconv.ParseInt(m[atomicop.VersionField], 10, 64)
			return ver, m["status"], true, err
		},
		func() (map[string]int64, error) {
			return c.Do(ctx, c.B().Hgetall().Key(nv.summaryKey()).Build()).AsIntMap()
		})
	if err != nil {
		return naive, ours, err
	}
	ours, err = raceUpdateErrors(f.keys, maxSent,
		func(k int) (int64, string, bool, error) {
			rec, ok, err := v.Get(ctx, raceDevice(k))
			return rec.Version, rec.Fields["status"], ok, err
		},
		func() (map[string]int64, error) { return v.Summary(ctx, raceDevice(0), raceSummary) })
	return naive, ours, err
}

// raceUpdateErrors compares the stored records with the newest version
// sent to each, and the summary with a recount of the records.
func raceUpdateErrors(keys int, maxSent []int64, get func(int) (int64, string, bool, error), summary func() (map[string]int64, error)) (raceUpdateSide, error) {
	var side raceUpdateSide
	recount := map[string]int64{}
	for k := range keys {
		ver, status, ok, err := get(k)
		if err != nil {
			return side, err
		}
		if !ok {
			if maxSent[k] >= 0 {
				side.StaleKeys++
			}
			continue
		}
		if ver != maxSent[k] {
			side.StaleKeys++
		}
		recount[status]++
	}
	sum, err := summary()
	if err != nil {
		return side, err
	}
	for s, n := range sum {
		side.AggregateDrift += abs64(n - recount[s])
	}
	for s, n := range recount {
		if _, ok := sum[s]; !ok {
			side.AggregateDrift += n
		}
	}
	return side, nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func printRaceUpdate(w io.Writer, f raceFlags, naive, ours raceUpdateSide, took time.Duration) {
	fmt.Fprintf(w, "hongbao race %s: %d updates of %d device records, sent out of order, %d workers per side (%.1fs, seed %d)\n\n",
		raceUpdateMode, f.ops, f.keys, f.workers, took.Seconds(), f.seed)
	fmt.Fprintf(w, "  %-17s %22s %22s\n", "", "naive HGET then HSET", "hongbao one script")
	fmt.Fprintf(w, "  %-17s %22d %22d\n", "stale keys", naive.StaleKeys, ours.StaleKeys)
	fmt.Fprintf(w, "  %-17s %22d %22d\n", "aggregate drift", naive.AggregateDrift, ours.AggregateDrift)
	fmt.Fprintln(w, "\n  stale keys: records whose stored version is not the newest sent to them")
	fmt.Fprintln(w, "  aggregate drift: the status summary against a recount of the stored records")
}

// ---- once ----------------------------------------------------------------

// raceWorkOrder returns the order in which the source hands out messages:
// rounds of --keys messages, each message --copies times, shuffled within
// the round, so several workers hold copies of one message at once.
func raceWorkOrder(f raceFlags, messages int) []int32 {
	rng := mrand.New(mrand.NewPCG(f.seed, 2))
	order := make([]int32, 0, messages*f.copies)
	for lo := 0; lo < messages; lo += f.keys {
		start := len(order)
		for m := lo; m < min(lo+f.keys, messages); m++ {
			for range f.copies {
				order = append(order, int32(m))
			}
		}
		round := order[start:]
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
	}
	return order
}

// raceMessages is the number of messages of a once race: --ops copies
// handed out, --copies per message.
func raceMessages(f raceFlags) int { return max(1, f.ops/f.copies) }

// raceSource hands copies of messages to workers and, like a queue with a
// visibility timeout, hands a copy out again when its worker died without
// acknowledging it.
type raceSource struct {
	work       chan int32
	pending    sync.WaitGroup
	visibility time.Duration
}

func newRaceSource(order []int32, visibility time.Duration) *raceSource {
	s := &raceSource{work: make(chan int32, len(order)), visibility: visibility}
	s.pending.Add(len(order))
	for _, m := range order {
		s.work <- m
	}
	go func() { s.pending.Wait(); close(s.work) }()
	return s
}

// ack acknowledges a copy: it is handled.
func (s *raceSource) ack() { s.pending.Done() }

// redeliver hands the copy of a dead worker out again after the visibility
// timeout. The buffer holds every copy, so the send never blocks.
func (s *raceSource) redeliver(m int32) {
	time.AfterFunc(s.visibility, func() { s.work <- m })
}

// raceReceiver counts the pushes of each message, the workers that died
// after a push, and the pushes that such a death caused.
//
// A death after a push causes a second push only once the dead worker's
// lease has run out: until then nobody else can claim the message. So a
// push counts as caused by an earlier after-push death when it comes at
// least half a lease after it; a duplicate of the naive check-then-mark
// race comes within a round trip of the first push.
type raceReceiver struct {
	start           time.Time
	caused          time.Duration
	pushes          []atomic.Int32
	afterPushDeaths []atomic.Int32
	firstDeathAt    []atomic.Int64 // ns since start, 0: none
	causedPushes    []atomic.Int32
}

func newRaceReceiver(messages int, lease time.Duration) *raceReceiver {
	return &raceReceiver{
		start:           time.Now(),
		caused:          lease / 2,
		pushes:          make([]atomic.Int32, messages),
		afterPushDeaths: make([]atomic.Int32, messages),
		firstDeathAt:    make([]atomic.Int64, messages),
		causedPushes:    make([]atomic.Int32, messages),
	}
}

// push receives message m (with its id, and for hongbao its token).
func (r *raceReceiver) push(m int32) {
	r.pushes[m].Add(1)
	if at := r.firstDeathAt[m].Load(); at > 0 && time.Since(r.start) >= time.Duration(at)+r.caused {
		r.causedPushes[m].Add(1)
	}
}

// diedAfterPush records that the worker that just pushed m died.
func (r *raceReceiver) diedAfterPush(m int32) {
	r.afterPushDeaths[m].Add(1)
	r.firstDeathAt[m].CompareAndSwap(0, int64(max(1, time.Since(r.start))))
}

func (r *raceReceiver) side(reportAfterPush bool) raceOnceSide {
	var s raceOnceSide
	var deaths, explained int64
	for m := range r.pushes {
		p, d := int64(r.pushes[m].Load()), int64(r.afterPushDeaths[m].Load())
		deaths += d
		if p == 0 {
			s.Lost++
			continue
		}
		// Each death causes at most one more push.
		e := min(p-1, d, int64(r.causedPushes[m].Load()))
		explained += e
		s.Duplicates += p - 1 - e
	}
	if reportAfterPush {
		s.AfterPushDeaths, s.AfterPushDuplicates = &deaths, &explained
	}
	return s
}

// raceOnce runs both approaches at once over the same workload and counts
// their errors.
func raceOnce(ctx context.Context, c rueidis.Client, prefix string, f raceFlags) (naive, ours raceOnceSide, err error) {
	order := raceWorkOrder(f, raceMessages(f))
	once, err := atomicop.NewOnce(c, &atomicop.OnceConfig{Prefix: prefix + "hongbao:", FenceTTL: 10 * time.Minute})
	if err != nil {
		return naive, ours, err
	}
	naivePrefix := prefix + "naive:"
	// Redelivery comes a little after the lease, so a dead worker's claim
	// has run out when its copy comes back.
	visibility := f.lease + f.lease/10 + 10*time.Millisecond
	keep := 10 * time.Minute

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &raceFirstError{cancel: cancel}
	recv := [2]*raceReceiver{}
	var wg sync.WaitGroup
	for side := range 2 {
		r := newRaceReceiver(raceMessages(f), f.lease)
		recv[side] = r
		src := newRaceSource(order, visibility)
		for w := range f.workers {
			rng := mrand.New(mrand.NewPCG(f.seed, uint64(3+2*w+side)))
			wg.Go(func() {
				for m := range src.work {
					if rctx.Err() != nil {
						src.ack()
						continue
					}
					id := "m" + strconv.Itoa(int(m))
					var err error
					if side == 0 {
						err = raceNaiveDeliver(rctx, c, naivePrefix+"pushed:"+id, m, src, r, rng, f)
					} else {
						err = raceOnceDeliver(rctx, once, id, m, src, r, rng, f, keep)
					}
					if err != nil {
						fail.set(err)
					}
				}
			})
		}
	}
	wg.Wait()
	if fail.err != nil {
		return naive, ours, fmt.Errorf("once: %w", fail.err)
	}
	if err := ctx.Err(); err != nil {
		return naive, ours, err
	}
	return recv[0].side(f.dieAfterPush > 0), recv[1].side(f.dieAfterPush > 0), nil
}

// raceNaiveDeliver is once-only delivery as usually first written: check
// the mark, set it, push. A worker that dies between the mark and the push
// loses the message; two workers that both check before either marks both
// push it.
func raceNaiveDeliver(ctx context.Context, c rueidis.Client, mark string, m int32, src *raceSource, r *raceReceiver, rng *mrand.Rand, f raceFlags) error {
	err := c.Do(ctx, c.B().Get().Key(mark).Build()).Error()
	if err == nil {
		src.ack() // already pushed, as far as the mark says
		return nil
	}
	if !rueidis.IsRedisNil(err) {
		src.ack()
		return err
	}
	if err := c.Do(ctx, c.B().Set().Key(mark).Value("1").Build()).Error(); err != nil {
		src.ack()
		return err
	}
	if rng.Float64() < f.die {
		src.redeliver(m)
		return nil
	}
	r.push(m)
	if rng.Float64() < f.dieAfterPush {
		r.diedAfterPush(m)
		src.redeliver(m)
		return nil
	}
	src.ack()
	return nil
}

// raceOnceDeliver is hongbao's way: claim, push with id and token, confirm.
// A worker told Busy acknowledges its copy: the holder's copy comes back
// if the holder dies.
func raceOnceDeliver(ctx context.Context, once *atomicop.Once, id string, m int32, src *raceSource, r *raceReceiver, rng *mrand.Rand, f raceFlags, keep time.Duration) error {
	cl, err := once.Claim(ctx, id, f.lease)
	if err != nil {
		src.ack()
		return err
	}
	if cl.Status != atomicop.Claimed {
		src.ack()
		return nil
	}
	if rng.Float64() < f.die {
		src.redeliver(m)
		return nil
	}
	r.push(m) // the push carries id and cl.Token
	if rng.Float64() < f.dieAfterPush {
		r.diedAfterPush(m)
		src.redeliver(m)
		return nil
	}
	err = once.Done(ctx, id, cl.Token, keep)
	src.ack()
	if errors.Is(err, atomicop.ErrNotOwner) {
		// The lease ran out and another worker claimed: a duplicate the
		// receiver will count. Not a failure of the run.
		return nil
	}
	return err
}

func printRaceOnce(w io.Writer, f raceFlags, naive, ours raceOnceSide, took time.Duration) {
	fmt.Fprintf(w, "hongbao race %s: %d messages, each handed to %d workers, %d workers per side (%.1fs, seed %d)\n",
		raceOnceMode, raceMessages(f), f.copies, f.workers, took.Seconds(), f.seed)
	fmt.Fprintf(w, "a winning worker dies before pushing with probability %.2f", f.die)
	if f.dieAfterPush > 0 {
		fmt.Fprintf(w, ", after pushing with probability %.2f", f.dieAfterPush)
	}
	fmt.Fprintf(w, "; lease %v\n\n", f.lease)
	fmt.Fprintf(w, "  %-22s %26s %26s\n", "", "naive check, mark, push", "hongbao claim, push, done")
	fmt.Fprintf(w, "  %-22s %26d %26d\n", "duplicates", naive.Duplicates, ours.Duplicates)
	fmt.Fprintf(w, "  %-22s %26d %26d\n", "lost", naive.Lost, ours.Lost)
	if naive.AfterPushDeaths != nil {
		fmt.Fprintf(w, "  %-22s %26d %26d\n", "after-push deaths", *naive.AfterPushDeaths, *ours.AfterPushDeaths)
		fmt.Fprintf(w, "  %-22s %26d %26d\n", "duplicates they caused", *naive.AfterPushDuplicates, *ours.AfterPushDuplicates)
		fmt.Fprintln(w, "\n  A worker that dies after its push and before Done causes a second push;")
		fmt.Fprintln(w, "  the receiver removes it by message id. These are not counted as duplicates above.")
	}
}
