package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

type discountDemoFlags struct {
	redis                   redisFlags
	budget, min, max        string
	perUserAmount           string
	quota, perUserCount     int
	shards, users, orders   int
	concurrency             int
	cancelShare, abandon    float64
	hold                    time.Duration
	seed, ledger            string
	json                    bool
	logFormat               string
	budgetCents, minC, maxC int64
	perUserCents            int64
}

// discountDemoReport is the --json output of discount-demo.
type discountDemoReport struct {
	Campaign          string         `json:"campaign"`
	Redis             string         `json:"redis"`
	Shards            int            `json:"shards"`
	BudgetCents       int64          `json:"budget_cents"`
	Quota             int            `json:"quota"`
	Users             int            `json:"users"`
	Orders            int64          `json:"orders"`
	Reserved          int64          `json:"reserved"`
	Exhausted         int64          `json:"exhausted"`
	Limit             int64          `json:"limit"`
	Cancelled         int64          `json:"cancelled"`
	Abandoned         int64          `json:"abandoned"`
	LateConfirms      int64          `json:"late_confirms"`
	ConfirmedCents    int64          `json:"confirmed_cents"`
	ConfirmedCount    int64          `json:"confirmed_count"`
	RemainingCents    int64          `json:"remaining_cents"`
	RemainingCount    int64          `json:"remaining_count"`
	CompensationCents int64          `json:"compensation_cents"`
	OverLimitUsers    int64          `json:"over_limit_users"`
	ConservationOK    bool           `json:"conservation_ok"`
	Problems          []string       `json:"problems,omitempty"`
	Seconds           float64        `json:"seconds"`
	OrdersPerSec      float64        `json:"orders_per_sec"`
	Transfers         uint64         `json:"transfers"`
	Ledger            string         `json:"ledger"`
	Settled           int64          `json:"settled"`
	RefundCents       int64          `json:"refund_cents"`
	ReconcileOK       bool           `json:"reconcile_ok"`
	Reconcile         *settle.Report `json:"reconcile,omitempty"`
}

// discountDemoCmd is "hongbao discount-demo": a simulated payment rush on
// a discount campaign, end to end: reservations, confirms, cancels and
// abandoned reservations that expire, settlement into the ledger, the
// refund of the leftover and a reconcile.
type discountDemoCmd struct {
	base
	f    discountDemoFlags
	spec hongbao.DiscountSpec

	led  ledger.Ledger
	conn *redisConn
	eng  *hongbao.Engine
	d    *hongbao.Discount
	w    *settle.Worker
}

func newDiscountDemoCmd(env *IO) command { return &discountDemoCmd{base: base{env: env}} }

func (f *discountDemoFlags) declare(fs *flag.FlagSet) {
	f.redis.declare(fs, "default: start a private redis-server, or an emulator if none is installed", true)
	fs.StringVar(&f.budget, "budget", "1000.00", "the budget to spend, a decimal with at most two places")
	fs.IntVar(&f.quota, "quota", 800, "number of discounts")
	fs.StringVar(&f.min, "min", "0.01", "smallest discount")
	fs.StringVar(&f.max, "max", "5.00", "largest discount")
	fs.IntVar(&f.perUserCount, "per-user-count", 3, "most discounts a user may hold (0: no limit)")
	fs.StringVar(&f.perUserAmount, "per-user-amount", "8.00", "most a user may hold in all (0: no limit)")
	fs.IntVar(&f.shards, "shards", 4, "shards (hash tags) of the campaign")
	fs.IntVar(&f.users, "users", 1000, "simulated users")
	fs.IntVar(&f.orders, "orders", 2, "orders per user, paid one after another")
	fs.IntVar(&f.concurrency, "concurrency", 64, "users paying at the same time")
	fs.Float64Var(&f.cancelShare, "cancel-share", 0.1, "share of reservations cancelled (the payment failed)")
	fs.Float64Var(&f.abandon, "abandon-share", 0.05, "share of reservations abandoned: neither confirmed nor cancelled, they expire after --hold")
	fs.DurationVar(&f.hold, "hold", 2*time.Second, "how long a reservation is held; short, so the abandoned ones expire within the demo")
	fs.StringVar(&f.seed, "seed", "", "amounts seed (an unsigned integer); default: random")
	fs.StringVar(&f.ledger, "ledger", "", "ledger: sqlite:PATH or postgres://...; default: a SQLite file in a temporary directory")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of the report")
	declareLogFormat(fs, &f.logFormat)
}

// parseFlags checks everything before anything starts.
func (d *discountDemoCmd) parseFlags(args []string) error {
	if _, err := d.parseCommand("discount-demo", "Usage: hongbao discount-demo [flags]\n\nEvery flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_QUOTA=100.\n\nFlags:",
		args, d.f.declare); err != nil {
		return err
	}
	f := &d.f
	if err := checkLogFormat(f.logFormat); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"quota", f.quota}, {"shards", f.shards}, {"users", f.users}, {"orders", f.orders}, {"concurrency", f.concurrency}} {
		if c.v < 1 {
			return usageErrorf("--%s must be at least 1, not %d", c.name, c.v)
		}
	}
	if f.cancelShare < 0 || f.abandon < 0 || f.cancelShare+f.abandon > 1 {
		return usageErrorf("--cancel-share and --abandon-share must be shares (0 to 1) that sum to at most 1")
	}
	if f.perUserCount < 0 {
		return usageErrorf("--per-user-count must not be negative")
	}
	return d.parseSpec()
}

// parseSpec builds the campaign's spec from the flags.
func (d *discountDemoCmd) parseSpec() error {
	f := &d.f
	for _, a := range []struct {
		name, v string
		to      *int64
	}{{"budget", f.budget, &f.budgetCents}, {"min", f.min, &f.minC}, {"max", f.max, &f.maxC}, {"per-user-amount", f.perUserAmount, &f.perUserCents}} {
		c, err := centsFlag(a.name, a.v)
		if err != nil {
			return err
		}
		*a.to = c
	}
	d.spec = hongbao.DiscountSpec{
		ID:     "ddemo-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36),
		Budget: f.budgetCents, Quota: f.quota, Min: f.minC, Max: f.maxC,
		PerUserCount: f.perUserCount, PerUserAmount: f.perUserCents, Shards: f.shards, Hold: f.hold,
	}
	var err error
	if d.spec.Seed, err = parseSeed(f.seed); err != nil {
		return err
	}
	if err := d.spec.Validate(); err != nil {
		return specUsageError(err, nil)
	}
	return nil
}

// open opens the ledger (the one given, or a SQLite file in a temporary
// directory), then Redis.
func (d *discountDemoCmd) open(ctx context.Context) (err error) {
	if d.led, err = d.demoLedger(ctx, d.f.ledger, "hongbao-discount-demo-"); err != nil {
		return err
	}
	d.conn, err = d.demoRedis(ctx, &d.f.redis)
	return err
}

func (d *discountDemoCmd) run(ctx context.Context) error {
	f := &d.f
	if !f.json {
		fmt.Fprintf(d.env.Stdout, "hongbao discount-demo: %s over %d discounts of %s..%s, %d shards, %d users x %d orders, %d at a time, Redis: %s (%s)\n",
			hongbao.FormatCents(f.budgetCents), f.quota, hongbao.FormatCents(f.minC), hongbao.FormatCents(f.maxC),
			f.shards, f.users, f.orders, f.concurrency, d.conn.Kind, d.conn.Addr)
	}
	if err := d.start(ctx); err != nil {
		return err
	}
	rep, told, err := d.rush(ctx)
	if err != nil {
		return err
	}
	if err := d.closeAndAudit(ctx, rep, told); err != nil {
		return err
	}
	if err := d.settle(ctx, rep); err != nil {
		return err
	}
	return d.report(rep)
}

// start creates the campaign, and starts settlement and the reaper.
func (d *discountDemoCmd) start(ctx context.Context) error {
	var err error
	legacy := d.conn.Kind == "emulator"
	log := demoLogger(d.env, d.f.logFormat)
	if d.eng, err = hongbao.New(hongbao.Config{Redis: d.conn.Client, LegacyScripts: legacy, WithoutLedger: true, Logger: log}); err != nil {
		return err
	}
	d.shutDownAtClose(d.eng)
	if d.d, err = d.eng.Discounts().Create(ctx, d.spec); err != nil {
		return err
	}
	if d.w, err = d.startWorker(ctx, settle.Config{
		Redis: d.conn.Client, Ledger: d.led, Consumer: "discount-demo", Only: []string{d.d.ID}, LegacyScripts: legacy,
		Logger: log,
	}); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.eng.Discounts().RunReaper(rctx, 100*time.Millisecond, nil)
	}()
	d.deferClose(func() { stop(); <-done })
	return nil
}

// settle drains the confirms into the ledger, refunds the leftover and
// reconciles.
func (d *discountDemoCmd) settle(ctx context.Context, rep *discountDemoReport) error {
	deadline := time.Now().Add(2*d.f.hold + 60*time.Second)
	for {
		if _, err := d.w.Drain(ctx); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		st, err := d.eng.Discounts().Status(ctx, d.d.ID)
		if err != nil {
			return err
		}
		if st.State == hongbao.StateSettled || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	rec, err := d.w.ReconcileDiscount(ctx, d.d.ID)
	if err != nil {
		return err
	}
	rep.Reconcile, rep.Settled, rep.RefundCents = rec, rec.GrantedLedger, rec.RefundCents
	rep.ReconcileOK = rec.OK && rec.State == "settled"
	rep.Ledger = ledgerKind(d.f.ledger)
	return nil
}

// report prints the report and turns a failed check into the exit status.
func (d *discountDemoCmd) report(rep *discountDemoReport) error {
	if d.f.json {
		if err := json.NewEncoder(d.env.Stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printDiscountDemo(d.env.Stdout, rep)
	}
	return demoVerdict(rep.ConservationOK, rep.ReconcileOK)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
