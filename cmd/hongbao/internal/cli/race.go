package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"time"

	"github.com/hongbao/hongbao/cmd/hongbao/internal/race"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// raceCmd is "hongbao race": a naive approach and hongbao's scripts side
// by side under load (package race), and what each got wrong.
type raceCmd struct {
	base
	mode   string
	redis  redisFlags
	json   bool
	cfg    race.Config
	conn   *redisConn
	prefix string
}

func newRaceCmd(env *IO) command { return &raceCmd{base: base{env: env}} }

const raceUsage = `Usage: hongbao race update-if-newer|once [flags]

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

Flags:`

func (c *raceCmd) parseFlags(args []string) error {
	fs := newFlagSet("race", c.env)
	cfg := &c.cfg
	c.redis.declare(fs, "default: start a private redis-server", false)
	fs.IntVar(&cfg.Workers, "workers", 64, "concurrent workers per approach")
	fs.IntVar(&cfg.Ops, "ops", 200000, "update-if-newer: updates sent; once: copies of messages handed out (messages = ops/copies)")
	fs.IntVar(&cfg.Keys, "keys", 100, "update-if-newer: device records; once: messages handed out together (their copies shuffled)")
	fs.BoolVar(&c.json, "json", false, `print {"naive": {...}, "hongbao": {...}} instead of a table`)
	fs.IntVar(&cfg.Copies, "copies", 3, "once: workers each message is handed to")
	fs.Float64Var(&cfg.Die, "die", 0.3, "once: probability that a worker dies after claiming, before pushing")
	fs.Float64Var(&cfg.DieAfterPush, "die-after-push", 0, "once: probability that a worker dies after pushing, before confirming")
	fs.DurationVar(&cfg.Lease, "lease", 500*time.Millisecond, "once: lease of a claim; the source redelivers a dead worker's copy a little after it")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "workload seed; 0: random")
	setUsage(fs, c.env, raceUsage)

	if len(args) == 0 {
		fs.Usage()
		return usageErrorf("want a mode: %s or %s", race.UpdateIfNewer, race.OnceOnly)
	}
	c.mode = args[0]
	switch c.mode {
	case race.UpdateIfNewer, race.OnceOnly:
	case "-h", "-help", "--help", "help":
		fs.Usage()
		return flag.ErrHelp
	case "-" + versionFlag, "--" + versionFlag:
		return errVersion
	default:
		fs.Usage()
		return usageErrorf("unknown mode %q: want %s or %s", c.mode, race.UpdateIfNewer, race.OnceOnly)
	}
	if err := parseFlags(fs, c.env, args[1:]); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	return nil
}

// open connects to --redis or starts a private redis-server: the race
// measures correctness, not durability, so without AOF.
func (c *raceCmd) open(ctx context.Context) error {
	conn, err := c.redis.connect(ctx, c.env, redisOptions{Server: redisserver.Options{AOF: "off"}})
	if err != nil {
		return err
	}
	c.conn = conn
	c.deferClose(conn.Close)
	c.prefix = race.NewPrefix()
	if conn.Kind == "given" {
		// The server is someone else's: take our keys away afterwards.
		c.deferClose(func() { race.Cleanup(context.WithoutCancel(ctx), conn.Client, c.prefix) })
	}
	return nil
}

func (c *raceCmd) run(ctx context.Context) error {
	start := time.Now()
	var (
		report      any
		oursFailed  bool
		printReport func(io.Writer, time.Duration)
	)
	if c.mode == race.UpdateIfNewer {
		naive, ours, err := race.Update(ctx, c.conn.Client, c.prefix, c.cfg)
		if err != nil {
			return err
		}
		report, oursFailed = race.Report[race.UpdateSide]{Naive: naive, Hongbao: ours}, ours != race.UpdateSide{}
		printReport = func(w io.Writer, took time.Duration) { printRaceUpdate(w, c.cfg, naive, ours, took) }
	} else {
		naive, ours, err := race.Once(ctx, c.conn.Client, c.prefix, c.cfg)
		if err != nil {
			return err
		}
		report, oursFailed = race.Report[race.OnceSide]{Naive: naive, Hongbao: ours}, ours.Duplicates != 0 || ours.Lost != 0
		printReport = func(w io.Writer, took time.Duration) { printRaceOnce(w, c.cfg, naive, ours, took) }
	}
	if c.json {
		if err := json.NewEncoder(c.env.Stdout).Encode(report); err != nil {
			return err
		}
	} else {
		printReport(c.env.Stdout, time.Since(start))
	}
	if oursFailed {
		return &exitError{code: 1, err: errors.New("hongbao's side got something wrong (see the report)")}
	}
	return nil
}

func printRaceUpdate(w io.Writer, cfg race.Config, naive, ours race.UpdateSide, took time.Duration) {
	fmt.Fprintf(w, "hongbao race %s: %d updates of %d device records, sent out of order, %d workers per side (%.1fs, seed %d)\n\n",
		race.UpdateIfNewer, cfg.Ops, cfg.Keys, cfg.Workers, took.Seconds(), cfg.Seed)
	fmt.Fprintf(w, "  %-17s %22s %22s\n", "", "naive HGET then HSET", "hongbao one script")
	fmt.Fprintf(w, "  %-17s %22d %22d\n", "stale keys", naive.StaleKeys, ours.StaleKeys)
	fmt.Fprintf(w, "  %-17s %22d %22d\n", "aggregate drift", naive.AggregateDrift, ours.AggregateDrift)
	fmt.Fprintln(w, "\n  stale keys: records whose stored version is not the newest sent to them")
	fmt.Fprintln(w, "  aggregate drift: the status summary against a recount of the stored records")
}

func printRaceOnce(w io.Writer, cfg race.Config, naive, ours race.OnceSide, took time.Duration) {
	fmt.Fprintf(w, "hongbao race %s: %d messages, each handed to %d workers, %d workers per side (%.1fs, seed %d)\n",
		race.OnceOnly, cfg.Messages(), cfg.Copies, cfg.Workers, took.Seconds(), cfg.Seed)
	fmt.Fprintf(w, "a winning worker dies before pushing with probability %.2f", cfg.Die)
	if cfg.DieAfterPush > 0 {
		fmt.Fprintf(w, ", after pushing with probability %.2f", cfg.DieAfterPush)
	}
	fmt.Fprintf(w, "; lease %v\n\n", cfg.Lease)
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
