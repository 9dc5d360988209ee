package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/split"
)

type demoFlags struct {
	redis       redisFlags
	total       string
	packets     int
	users       int
	clicks      int
	concurrency int
	split       string
	seed        string
	json        bool
	logFormat   string
	ledger      string
	settle      bool
	shards      int
	waitN       int
	waitTimeout time.Duration
	web         bool    // demo --web
	listen      string  // with --web
	crowd       float64 // with --web
}

// demoReport is the --json output of demo.
type demoReport struct {
	Campaign         string   `json:"campaign"`
	Redis            string   `json:"redis"`
	Split            string   `json:"split"`
	Packets          int      `json:"packets"`
	Shards           int      `json:"shards"`
	Transfers        uint64   `json:"transfers"`
	PacketsMoved     uint64   `json:"packets_moved"`
	TotalCents       int64    `json:"total_cents"`
	Users            int      `json:"users"`
	Clicks           int      `json:"clicks"`
	Concurrency      int      `json:"concurrency"`
	Attempts         int64    `json:"attempts"`
	Granted          int64    `json:"granted"`
	Already          int64    `json:"already"`
	SoldOut          int64    `json:"sold_out"`
	OtherOutcomes    int64    `json:"other_outcomes"`
	Retries          int64    `json:"retries"`
	GrantedCents     int64    `json:"granted_cents"`
	RemainingCents   int64    `json:"remaining_cents"`
	DuplicateUsers   int64    `json:"duplicate_users"`
	DuplicatePackets int64    `json:"duplicate_packets"`
	ConservationOK   bool     `json:"conservation_ok"`
	Problems         []string `json:"problems,omitempty"`
	Seconds          float64  `json:"seconds"`
	GrabsPerSec      float64  `json:"grabs_per_sec"`
	LuckiestUser     string   `json:"luckiest_user,omitempty"`
	LuckiestCents    int64    `json:"luckiest_cents,omitempty"`
	Ledger           string   `json:"ledger,omitempty"`
	Settled          int64    `json:"settled"`
	RefundCents      int64    `json:"refund_cents"`
	ReconcileOK      bool     `json:"reconcile_ok"`
	SettleLagSeconds float64  `json:"settle_lag_seconds"`
	// CaughtUpSeconds is how long after the last grab the ledger held
	// every grant (the worker settling while it rained); SettleLagSeconds
	// adds the close, the audit, the refund and the reconcile.
	CaughtUpSeconds float64        `json:"caught_up_seconds"`
	SettlePerSec    float64        `json:"settle_per_sec"`
	Reconcile       *settle.Report `json:"reconcile,omitempty"`
}

// demoCmd is "hongbao demo": a simulated red packet rain end to end,
// checked against the invariants.
type demoCmd struct {
	base
	f    demoFlags
	spec hongbao.Spec

	led  ledger.Ledger // nil with --settle=false
	conn *redisConn
	eng  *hongbao.Engine
	camp *hongbao.Campaign
	w    *settle.Worker // nil with --settle=false

	web *demoWeb // with --web, the command it runs instead
}

func newDemoCmd(env *IO) command { return &demoCmd{base: base{env: env}} }

func (f *demoFlags) declare(fs *flag.FlagSet) {
	f.redis.declare(fs, "default: start a private redis-server, or an emulator if none is installed", true)
	fs.StringVar(&f.total, "total", "10000.00", "amount to hand out, a decimal with at most two places")
	fs.IntVar(&f.packets, "packets", 10000, "number of packets")
	fs.IntVar(&f.users, "users", 50000, "number of simulated users")
	fs.IntVar(&f.clicks, "clicks", 2, "concurrent grabs per user (double clicks must be safe)")
	fs.IntVar(&f.concurrency, "concurrency", 256, "users grabbing at the same time")
	fs.StringVar(&f.split, "split", "double-average", "split algorithm: double-average, line-cut or fixed")
	fs.StringVar(&f.seed, "seed", "", "split seed (an unsigned integer); default: random")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of the report")
	fs.IntVar(&f.shards, "shards", 1, "spread the campaign over this many shards (1 to 256, at most --packets): on a Redis Cluster, over several masters")
	fs.StringVar(&f.ledger, "ledger", "", "ledger: sqlite:PATH or postgres://...; default: a SQLite file in a temporary directory")
	fs.IntVar(&f.waitN, "wait-replicas", 0, "answer a grant only once this many replicas of --redis hold it (WAIT), and settle only what they hold; 0: off")
	fs.DurationVar(&f.waitTimeout, "wait-timeout", 500*time.Millisecond, "how long each WAIT for --wait-replicas may take (below 5s)")
	fs.BoolVar(&f.settle, "settle", true, "settle into the ledger while it rains, then refund and reconcile; --settle=false (only with --redis) leaves the grants in Redis for 'hongbao settle'")
	fs.BoolVar(&f.web, "web", false, "serve a rain to play in a browser, and the console, until Ctrl-C (hongbao serve on its own Redis, with a demo campaign that opens again when it sells out; --total and --packets default to "+webDemoTotal+" and "+strconv.Itoa(webDemoPackets)+")")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "with --web: the address to serve on")
	fs.Float64Var(&f.crowd, "crowd", 1, "with --web: grabs per second by simulated users, so the rain moves and sells out (0: nobody but you)")
	declareLogFormat(fs, &f.logFormat)
}

// parseFlags checks everything before anything starts.
func (d *demoCmd) parseFlags(args []string) error {
	fs, err := d.parseCommand("demo", "Usage: hongbao demo [flags]\n\nEvery flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_PACKETS=100.\n\nFlags:",
		args, d.f.declare)
	if err != nil {
		return err
	}
	f, set := &d.f, given(fs)
	if err := checkLogFormat(f.logFormat); err != nil {
		return err
	}
	if f.web {
		return d.parseWeb(set)
	}
	if set["listen"] || set["crowd"] {
		return usageErrorf("--listen and --crowd go with --web")
	}
	total, err := centsFlag("total", f.total)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"packets", f.packets}, {"users", f.users}, {"clicks", f.clicks}, {"concurrency", f.concurrency}} {
		if c.v < 1 {
			return usageErrorf("--%s must be at least 1, not %d", c.name, c.v)
		}
	}
	if f.clicks > 100 {
		return usageErrorf("--clicks must be at most 100")
	}
	if err := d.parseSpec(total); err != nil {
		return err
	}
	if !f.settle && f.redis.url == "" {
		return usageErrorf("--settle=false needs --redis: the grants must stay in a Redis that outlives the demo")
	}
	if !f.settle && f.ledger != "" {
		return usageErrorf("--ledger makes no sense with --settle=false")
	}
	if f.waitN < 0 || f.waitTimeout <= 0 || f.waitTimeout >= hongbao.DefaultBatchTimeout {
		return usageErrorf("--wait-replicas must not be negative and --wait-timeout must be within 0 and %s (the engine's batch timeout)", hongbao.DefaultBatchTimeout)
	}
	return nil
}

// parseWeb checks the flags of demo --web (set names those given on the
// command line) and makes the command demo runs instead.
func (d *demoCmd) parseWeb(set map[string]bool) error {
	w, err := newDemoWeb(d.env, &d.f, set)
	if err != nil {
		return err
	}
	total, err := centsFlag("total", d.f.total)
	if err != nil {
		return err
	}
	if err := d.parseSpec(total); err != nil {
		return err
	}
	w.rain = d.spec
	w.rain.ID = ""
	d.web = w
	return nil
}

// close lets go of what open started: the web demo's, or the rain's.
func (d *demoCmd) close() {
	if d.web != nil {
		d.web.close()
	}
	d.base.close()
}

// parseSpec builds the campaign's spec of total cents from the flags.
func (d *demoCmd) parseSpec(total int64) error {
	f := &d.f
	alg, err := splitFlag(f.split)
	if err != nil {
		return err
	}
	d.spec = hongbao.Spec{
		ID:    "demo-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36),
		Total: total, Count: f.packets, Split: alg, Shards: f.shards,
	}
	if f.shards < 1 || f.shards > hongbao.MaxShards {
		return usageErrorf("--shards must be within 1 and %d, not %d", hongbao.MaxShards, f.shards)
	}
	if d.spec.Seed, err = parseSeed(f.seed); err != nil {
		return err
	}
	if err := d.spec.Validate(); err != nil {
		return specUsageError(err, map[string]string{"count": "packets"})
	}
	return nil
}

// centsFlag parses the amount v of flag --name: "--total: invalid amount
// "1.005": want at most two decimals, as in 12.34" (a usage error, without
// the library's prefix).
func centsFlag(name, v string) (int64, error) {
	c, err := hongbao.ParseCents(v)
	var ae *hongbao.AmountError
	switch {
	case errors.As(err, &ae):
		return 0, usageErrorf("--%s: invalid amount %q: %s", name, ae.Input, ae.Reason)
	case err != nil:
		return 0, usageErrorf("--%s: %v", name, err)
	}
	return c, nil
}

// splitFlag parses --split: "--split: unknown "magic"; valid: ..." (a
// usage error, without the split package's prefix).
func splitFlag(v string) (split.Algorithm, error) {
	alg, err := split.ParseAlgorithm(v)
	var se *split.SpecError
	switch {
	case errors.As(err, &se):
		return "", usageErrorf("--split: %s", se.Reason)
	case err != nil:
		return "", usageErrorf("--split: %v", err)
	}
	return alg, nil
}

// specUsageError names the flag a refused spec field came from: "--total:
// 100 cents cannot give 101 packets ...". flags maps the spec's field
// names that differ from the flags' (count is --packets).
func specUsageError(err error, flags map[string]string) error {
	var se *hongbao.SpecError
	if !errors.As(err, &se) {
		return usageErrorf("%v", err)
	}
	name := se.Field
	if f, ok := flags[name]; ok {
		name = f
	}
	return usageErrorf("--%s: %s", strings.ReplaceAll(name, "_", "-"), se.Reason)
}

// open opens the ledger (with --settle: the one given, or a SQLite file
// in a temporary directory), then Redis.
func (d *demoCmd) open(ctx context.Context) (err error) {
	if d.web != nil {
		return d.web.open(ctx)
	}
	if d.f.settle {
		if d.led, err = d.demoLedger(ctx, d.f.ledger, "hongbao-demo-ledger-"); err != nil {
			return err
		}
	}
	d.conn, err = d.demoRedis(ctx, &d.f.redis)
	return err
}

// demoLedger opens the ledger at dsn or, when dsn is empty, a SQLite file
// in a new temporary directory named after prefix, removed at the end.
// The ledger is closed when the command closes.
func (b *base) demoLedger(ctx context.Context, dsn, prefix string) (ledger.Ledger, error) {
	if dsn == "" {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			return nil, err
		}
		b.deferClose(func() { _ = os.RemoveAll(dir) })
		dsn = "sqlite:" + filepath.Join(dir, "ledger.db")
	}
	l, err := openLedger(ctx, dsn)
	if err != nil {
		return nil, err
	}
	b.deferClose(func() { _ = l.Close() })
	return l, nil
}

// shutDownAtClose shuts eng down when the command closes: before the
// ledger and Redis it uses, opened before it (closers run last opened
// first), so no block it opens ahead of need meets a closed ledger.
func (b *base) shutDownAtClose(eng *hongbao.Engine) {
	b.deferClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
}

// demoRedis connects to the demo's Redis as its flags say, the emulator
// allowed, until the command closes.
func (b *base) demoRedis(ctx context.Context, r *redisFlags) (*redisConn, error) {
	conn, err := r.connect(ctx, b.env, redisOptions{AllowEmulator: true})
	if err != nil {
		return nil, err
	}
	b.deferClose(conn.Close)
	return conn, nil
}

// demoLogger is the logger of a demo's engine and worker: warnings and
// worse, on stderr, in format. The demo's report says the rest.
func demoLogger(env *IO, format string) *slog.Logger {
	return newLevelLogger(env, format, slog.LevelWarn)
}

// startWorker starts a settlement worker of cfg until the command closes.
func (b *base) startWorker(ctx context.Context, cfg settle.Config) (*settle.Worker, error) {
	w, err := settle.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	b.deferClose(w.Stop)
	return w, nil
}

// parseSeed reads --seed; empty is a random seed (nil).
func parseSeed(s string) (*uint64, error) {
	if s == "" {
		return nil, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, usageErrorf("--seed must be an unsigned integer: %q", s)
	}
	return &v, nil
}

// demoVerdict turns a demo's checks into its exit status.
func demoVerdict(conservationOK, reconcileOK bool) error {
	if !conservationOK {
		return &exitError{code: 1, err: errors.New("invariant check FAILED")}
	}
	if !reconcileOK {
		return &exitError{code: 1, err: errors.New("reconcile FAILED")}
	}
	return nil
}

func (d *demoCmd) run(ctx context.Context) error {
	if d.web != nil {
		return d.web.run(ctx)
	}
	f := &d.f
	if !f.json {
		fmt.Fprintf(d.env.Stdout, "hongbao demo: %s in %d packets (%s), %d users x %d clicks, %d at a time, Redis: %s (%s)\n",
			hongbao.FormatCents(d.spec.Total), f.packets, d.spec.Split, f.users, f.clicks, f.concurrency, d.conn.Kind, d.conn.Addr)
	}
	if err := d.create(ctx); err != nil {
		return err
	}
	if err := d.startSettlement(ctx); err != nil {
		return err
	}
	settleStart := time.Now()
	rep, told, err := rain(ctx, d.env, d.eng, d.camp, d.f)
	if err != nil {
		return err
	}
	rainEnd := time.Now()
	d.awaitCaughtUp(ctx, rep, told, rainEnd)
	audit, err := d.closeAndAudit(ctx)
	if err != nil {
		return err
	}
	rep.Redis = d.conn.Kind
	rep.Shards = d.camp.Shards
	stats := d.eng.Stats()
	rep.Transfers, rep.PacketsMoved = stats.Transfers, stats.Moved
	check(rep, told, audit)
	if err := d.finishSettlement(ctx, rep, settleStart, rainEnd); err != nil {
		return err
	}
	return d.report(rep, told, audit)
}

// create loads the campaign, with a progress bar.
func (d *demoCmd) create(ctx context.Context) error {
	load := startProgress(d.env, !d.f.json, "loading", int64(d.f.packets))
	defer load.Done()
	var err error
	cfg := hongbao.Config{Redis: d.conn.Client, LegacyScripts: d.conn.Kind == "emulator", LoadProgress: func(n, _ int) { load.Set(int64(n)) },
		WaitReplicas: d.f.waitN, WaitTimeout: d.f.waitTimeout, Logger: demoLogger(d.env, d.f.logFormat)}
	if d.led != nil {
		cfg.Packets = d.led // every packet and the terms, before the campaign goes live
	} else {
		cfg.WithoutLedger = true // --settle=false: the grants stay in Redis for another process
	}
	d.eng, err = hongbao.New(cfg)
	if err != nil {
		return err
	}
	d.shutDownAtClose(d.eng)
	d.camp, err = d.eng.Create(ctx, d.spec)
	return err
}

// startSettlement funds the campaign in the ledger and starts a worker
// that settles while it rains, when there is a ledger.
func (d *demoCmd) startSettlement(ctx context.Context) error {
	if d.led == nil {
		return nil
	}
	// The creator is the first to touch the campaign in the ledger: it
	// writes the fund entry (idempotent; the worker writes it too, from
	// meta, when it comes first).
	c := d.camp
	if err := d.led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}); err != nil {
		return fmt.Errorf("fund the campaign in the ledger: %w", err)
	}
	w, err := d.startWorker(ctx, settle.Config{
		Redis: d.conn.Client, Ledger: d.led, Consumer: "demo", Only: []string{c.ID},
		WaitReplicas: d.f.waitN, WaitTimeout: d.f.waitTimeout, LegacyScripts: d.conn.Kind == "emulator",
		Logger: demoLogger(d.env, d.f.logFormat),
	})
	d.w = w
	return err
}

// closeAndAudit closes the campaign and audits Redis's contents.
func (d *demoCmd) closeAndAudit(ctx context.Context) (*hongbao.Audit, error) {
	if d.w != nil {
		// The background worker stops before the close: running on, it
		// would refund the closed campaign and unlink its pool while the
		// audit below reads it, and the audit would count a pool half gone.
		d.w.Stop()
	}
	if _, err := d.eng.CloseCampaign(ctx, d.camp.ID); err != nil {
		return nil, err
	}
	// The audit runs on the closed campaign, before the refund takes the
	// pool's remainder out of Redis.
	return d.eng.Audit(ctx, d.camp.ID)
}

// awaitCaughtUp waits, when a worker settles beside the rain, until the
// ledger holds every grant the rain made (at most a minute), and records
// when: the lag of settlement behind the grants.
func (d *demoCmd) awaitCaughtUp(ctx context.Context, rep *demoReport, told []toldUser, rainEnd time.Time) {
	if d.w == nil {
		return
	}
	var granted int64
	for _, t := range told {
		for _, a := range t.answers {
			if a.outcome == hongbao.Granted {
				granted++
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if st := d.w.Stats(); st.Grants+st.Replayed >= granted {
			rep.CaughtUpSeconds = math.Round(time.Since(rainEnd).Seconds()*1000) / 1000
			return
		}
		d.w.Wake()
		time.Sleep(5 * time.Millisecond)
	}
}

// finishSettlement drains the grants into the ledger, refunds and
// reconciles, when there is a ledger.
func (d *demoCmd) finishSettlement(ctx context.Context, rep *demoReport, settleStart, rainEnd time.Time) error {
	w := d.w
	if w == nil {
		return nil
	}
	if _, err := w.Drain(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	rep.SettleLagSeconds = math.Round(time.Since(rainEnd).Seconds()*1000) / 1000
	if el := time.Since(settleStart).Seconds(); el > 0 {
		rep.SettlePerSec = math.Round(float64(w.Stats().Grants)/el*10) / 10
	}
	rec, err := w.Reconcile(ctx, d.camp.ID)
	if err != nil {
		return err
	}
	rep.Reconcile = rec
	rep.Ledger = ledgerKind(d.f.ledger)
	rep.Settled = rec.GrantedLedger
	rep.RefundCents = rec.RefundCents
	rep.ReconcileOK = rec.OK && rec.State == "settled"
	// After the figures: the users' balances are right without it (read
	// from the journal), and the ledger is left with nothing pending.
	_, err = w.RollUps(ctx)
	return err
}

// report prints the report and turns a failed check into the exit status.
func (d *demoCmd) report(rep *demoReport, told []toldUser, audit *hongbao.Audit) error {
	if d.f.json {
		if err := json.NewEncoder(d.env.Stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printDemo(d.env.Stdout, rep, told, audit)
	}
	return demoVerdict(rep.ConservationOK, d.led == nil || rep.ReconcileOK)
}

// answer is what one simulated click was told.
type answer struct {
	outcome hongbao.Outcome
	seq     int64
	cents   int64
}

// toldUser is what the clients of one user were told, in all.
type toldUser struct {
	answers []answer
}

// forUsers hands the users 0..n-1 to workers goroutines, each running
// work on the users it receives, and waits for them; it hands out no more
// users once ctx ends.
func forUsers(ctx context.Context, n, workers int, work func(w int, users <-chan int)) {
	users := make(chan int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(w, users) })
	}
feed:
	for u := range n {
		select {
		case users <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(users)
	wg.Wait()
}

// rain lets every user click concurrently and records every answer.
func rain(ctx context.Context, env *IO, eng *hongbao.Engine, camp *hongbao.Campaign, f demoFlags) (*demoReport, []toldUser, error) {
	told := make([]toldUser, f.users)
	for i := range told {
		told[i].answers = make([]answer, f.clicks)
	}
	rep := &demoReport{
		Campaign: camp.ID, Split: string(camp.Split), Packets: camp.Count, TotalCents: camp.Total,
		Users: f.users, Clicks: f.clicks, Concurrency: f.concurrency,
	}
	bar := startProgress(env, !f.json, "grabbing", int64(f.users)*int64(f.clicks))
	defer bar.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &clicker{eng: eng, campaign: camp.ID, told: told, bar: bar}
	c.fail = func(err error) { c.errOnce.Do(func() { c.err = err; cancel() }) }
	start := time.Now()
	forUsers(ctx, f.users, f.concurrency, func(_ int, users <-chan int) {
		for u := range users {
			c.user(ctx, u)
		}
	})
	rep.Seconds = time.Since(start).Seconds()
	if c.err != nil {
		return nil, nil, c.err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c.retries.Range(func(_, v any) bool { rep.Retries += int64(v.(int)); return true })
	return rep, told, nil
}

// clicker grabs for the simulated users and records what they are told.
type clicker struct {
	eng      *hongbao.Engine
	campaign string
	told     []toldUser
	bar      *progress
	retries  sync.Map // [user, click] -> retries
	fail     func(error)
	errOnce  sync.Once
	err      error // the first error, which ends the rain
}

// user lets user u click as many times as told, all at once, and waits.
func (c *clicker) user(ctx context.Context, u int) {
	var clicks sync.WaitGroup
	for i := range c.told[u].answers {
		clicks.Go(func() { c.click(ctx, u, i) })
	}
	clicks.Wait()
}

// click is user u's click i: one grab, retried when its reply was lost
// or the engine answered busy (it did nothing: a grab shed, or one that
// waited too long for the next block of packets to open), as a client of
// the API retries them.
func (c *clicker) click(ctx context.Context, u, i int) {
	name := bench.UserName(u)
	for attempt := 0; ; attempt++ {
		g, err := c.eng.Grab(ctx, c.campaign, name)
		if errors.Is(err, hongbao.ErrOutcomeUnknown) && attempt < 3 && ctx.Err() == nil {
			// Safe: a retried grab returns the packet the lost call granted.
			c.retries.Store([2]int{u, i}, attempt+1)
			continue
		}
		if errors.Is(err, hongbao.ErrBusy) && attempt < 20 && ctx.Err() == nil {
			c.retries.Store([2]int{u, i}, attempt+1)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.told[u].answers[i] = answer{g.Outcome, g.Seq, g.Cents}
		c.bar.Add(1)
		return
	}
}

// check recomputes the invariants from what the clients were told and
// compares them with the audit of Redis's contents.
func check(rep *demoReport, told []toldUser, audit *hongbao.Audit) {
	problems := append([]string(nil), audit.Problems...)
	nProblems := audit.ProblemCount
	problem := func(format string, a ...any) {
		nProblems++
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
	}
	owner := map[int64]int{} // packet seq -> user index
	var toldCount, toldCents int64
	for u, t := range told {
		var held *answer
		granted := 0
		for i := range t.answers {
			a := &t.answers[i]
			rep.Attempts++
			switch a.outcome {
			case hongbao.Granted:
				rep.Granted++
				granted++
			case hongbao.Already:
				rep.Already++
			case hongbao.SoldOut:
				rep.SoldOut++
			default:
				rep.OtherOutcomes++
			}
			if !a.outcome.HasPacket() {
				continue
			}
			if held == nil {
				held = a
			} else if a.seq != held.seq || a.cents != held.cents {
				rep.DuplicateUsers++
				problem("user %s was told packets %d and %d", bench.UserName(u), held.seq, a.seq)
			}
		}
		if granted > 1 {
			rep.DuplicateUsers++
			problem("user %s was told GRANTED %d times", bench.UserName(u), granted)
		}
		if held == nil {
			continue
		}
		if granted == 0 {
			problem("user %s was told ALREADY but never GRANTED", bench.UserName(u))
		}
		if o, dup := owner[held.seq]; dup {
			rep.DuplicatePackets++
			problem("packet %d was told to %s and %s", held.seq, bench.UserName(o), bench.UserName(u))
		}
		owner[held.seq] = u
		toldCount++
		toldCents += held.cents
		if held.cents > rep.LuckiestCents {
			rep.LuckiestCents, rep.LuckiestUser = held.cents, bench.UserName(u)
		}
	}
	rep.GrantedCents = audit.Status.GrantedCents
	rep.RemainingCents = audit.Status.RemainingCents
	if toldCount != audit.ClaimsCount || toldCents != audit.ClaimsCents {
		problem("clients were told of %d packets, %d cents; the claims hold %d, %d cents",
			toldCount, toldCents, audit.ClaimsCount, audit.ClaimsCents)
	}
	if toldCents+audit.PoolCents+audit.Status.RefundedCents != rep.TotalCents {
		problem("conservation from the clients' view: told %d + pool %d + refunded %d != total %d",
			toldCents, audit.PoolCents, audit.Status.RefundedCents, rep.TotalCents)
	}
	if rep.OtherOutcomes != 0 {
		problem("%d answers were neither GRANTED, ALREADY nor SOLD_OUT during the open window", rep.OtherOutcomes)
	}
	if rep.Seconds > 0 {
		rep.GrabsPerSec = math.Round(float64(rep.Attempts)/rep.Seconds*10) / 10
	}
	rep.Seconds = math.Round(rep.Seconds*1000) / 1000
	rep.Problems = problems
	rep.ConservationOK = nProblems == 0 && rep.DuplicateUsers == 0 && rep.DuplicatePackets == 0
}

func printDemo(w io.Writer, rep *demoReport, told []toldUser, audit *hongbao.Audit) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("\nCampaign %s: %d packets, %s\n", rep.Campaign, rep.Packets, hongbao.FormatCents(rep.TotalCents))
	if rep.Shards > 1 {
		p("  shards     %10d  (%d transfers moved %d packets to shards that ran dry)\n", rep.Shards, rep.Transfers, rep.PacketsMoved)
	}
	p("  attempts   %10d  (%d users x %d clicks)\n", rep.Attempts, rep.Users, rep.Clicks)
	p("  granted    %10d\n", rep.Granted)
	p("  already    %10d  (repeat clicks answered with the user's own packet)\n", rep.Already)
	p("  sold out   %10d\n", rep.SoldOut)
	if rep.Retries > 0 {
		p("  retried    %10d  (lost replies and busy answers, retried safely)\n", rep.Retries)
	}
	p("  grabs/s    %10.0f  (%.2f s)\n", rep.GrabsPerSec, rep.Seconds)

	var amounts []int64
	for _, t := range told {
		for _, a := range t.answers {
			if a.outcome == hongbao.Granted {
				amounts = append(amounts, a.cents)
			}
		}
	}
	if len(amounts) > 0 {
		p("\nAmounts granted:\n")
		p("%s", histogram(amounts, 10, 40))
		p("  luckiest user: %s with %s\n", rep.LuckiestUser, hongbao.FormatCents(rep.LuckiestCents))
	}

	p("\nConservation check (from the clients' answers, the claims, the pool's contents, the grants stream and the counters):\n")
	p("  granted (claims)   %14s in %d packets\n", hongbao.FormatCents(audit.ClaimsCents), audit.ClaimsCount)
	p("  left in the pool   %14s in %d packets\n", hongbao.FormatCents(audit.PoolCents), audit.PoolCount)
	p("  refunded           %14s\n", hongbao.FormatCents(audit.Status.RefundedCents))
	p("  total              %14s\n", hongbao.FormatCents(rep.TotalCents))
	p("  users with two packets: %d, packets with two users: %d\n", rep.DuplicateUsers, rep.DuplicatePackets)
	printVerdict(w, rep.ConservationOK, "  OK: every cent accounted for, no user twice, no packet twice", "  FAILED:", rep.Problems)
	if rec := rep.Reconcile; rec != nil {
		p("\nSettlement into the ledger (%s): %d grants, %.0f grants/s, every grant in the ledger %.2f s after the last grab, refunded and reconciled after %.2f s\n",
			rep.Ledger, rep.Settled, rep.SettlePerSec, rep.CaughtUpSeconds, rep.SettleLagSeconds)
		p("  refunded %s to the funding account; escrow %s; campaign %s\n",
			hongbao.FormatCents(rec.RefundCents), hongbao.FormatCents(rec.EscrowCents), rec.State)
		printVerdict(w, rep.ReconcileOK, "  OK: Redis and the ledger agree to the cent", "  RECONCILE FAILED:", rec.Differences)
	}
}

// histogram draws amounts as a text histogram of n buckets.
func histogram(amounts []int64, n, width int) string {
	sort.Slice(amounts, func(i, j int) bool { return amounts[i] < amounts[j] })
	lo, hi := amounts[0], amounts[len(amounts)-1]
	span := hi - lo + 1
	if int64(n) > span {
		n = int(span)
	}
	counts := make([]int, n)
	for _, a := range amounts {
		b := int((a - lo) * int64(n) / span)
		counts[b]++
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	var sb strings.Builder
	for i, c := range counts {
		from := lo + span*int64(i)/int64(n)
		to := lo + span*int64(i+1)/int64(n) - 1
		bar := 0
		if most > 0 {
			bar = int(math.Ceil(float64(c) * float64(width) / float64(most)))
		}
		fmt.Fprintf(&sb, "  %10s - %-10s %7d %s\n", hongbao.FormatCents(from), hongbao.FormatCents(to), c, strings.Repeat("█", bar))
	}
	return sb.String()
}
