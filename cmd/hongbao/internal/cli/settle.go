package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/webhook"
)

// openLedger opens the ledger at dsn, creating and migrating it: for the
// commands that write it (serve, settle, demo, rebuild, migrate).
func openLedger(ctx context.Context, dsn string) (ledger.Ledger, error) {
	return openLedgerWith(ctx, dsn, open.Open)
}

// openExistingLedger opens the ledger at dsn only if it exists at this
// build's schema version, and creates nothing: for the commands that read
// it (reconcile), so a mistyped --ledger is an error (ledger.ErrNotMigrated,
// saying to run hongbao migrate), not a new, empty ledger.
func openExistingLedger(ctx context.Context, dsn string) (ledger.Ledger, error) {
	return openLedgerWith(ctx, dsn, open.OpenExisting)
}

func openLedgerWith(ctx context.Context, dsn string, opener func(context.Context, string) (ledger.Ledger, error)) (ledger.Ledger, error) {
	if dsn == "" {
		return nil, usageErrorf("--ledger is required (sqlite:PATH or postgres://...)")
	}
	l, err := opener(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return l, nil
}

// openLedgerRedis opens the ledger at dsn, then the Redis r names, each
// let go of when the command closes.
func (b *base) openLedgerRedis(ctx context.Context, dsn string, r *redisFlags) (ledger.Ledger, *redisConn, error) {
	l, err := openLedger(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	b.deferClose(func() { _ = l.Close() })
	conn, err := r.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	b.deferClose(conn.Close)
	return l, conn, nil
}

// settleCmd is "hongbao settle": the scheduler (settlement, close on
// time, refunds, the discount reaper) under the lease, until interrupted,
// or with --drain a worker until nothing is left to settle.
type settleCmd struct {
	base
	redis                    redisFlags
	dsn, hook, hookSecret    string
	drain, asJSON            bool
	redrive, consumer, only  string
	retention, waitTimeout   time.Duration
	drawLogRetention         time.Duration
	reapEvery                time.Duration
	hookName                 string
	leaseTTL                 time.Duration
	lease, otlpEndpoint      string
	metricsListen, logFormat string
	waitN, parts             int
	campaigns                []string
	sched                    *scheduler.Scheduler
	led                      ledger.Ledger // nil with --webhook
	log                      *slog.Logger
}

// settleUsage introduces settle's flags.
const settleUsage = `Usage: hongbao settle [flags]

Runs the scheduler of a deployment whose API processes run without it
(serve --settle=false): settlement of grants and confirmed discounts into
the ledger (or a host's wallet, --webhook), closing campaigns on time,
refunds, roll-ups and the discount reaper, while this process holds the
scheduler lease (or, with --settle-parts above 1, its parts). Processes
that wait for the lease say whom they wait for. With --metrics-listen it
serves /metrics (settlement counters, the lease and the parts) and
/healthz, as serve does on its own metrics address. With --drain it settles
what is there, without the lease, and exits.

Every flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_LEDGER=sqlite:x.db;
both override --config.

Flags:`

func newSettleCmd(env *IO) command { return &settleCmd{base: base{env: env}} }

func (c *settleCmd) parseFlags(args []string) error {
	fs := newFlagSet("settle", c.env)
	c.redis.declare(fs, "required", false)
	c.redis.declareNamespace(fs)
	fs.StringVar(&c.dsn, "ledger", "", "ledger: sqlite:PATH or postgres://... (this or --webhook is required)")
	fs.StringVar(&c.hook, "webhook", "", "instead of a ledger, POST signed batches to this URL (a host's own wallet)")
	fs.StringVar(&c.hookSecret, "webhook-secret-file", "", "file holding the webhook's HMAC secret (at least 32 bytes; surrounding whitespace is trimmed)")
	fs.StringVar(&c.hookName, "webhook-name", "", "the name of the wallet the webhook pays, the owner its campaigns record (the engines' hongbao.Config.Owner); default: webhook:<the URL without credentials or query>")
	fs.DurationVar(&c.reapEvery, "reap-every", time.Second, "how often the holder of the lease expires discount reservations whose hold has passed")
	fs.BoolVar(&c.drain, "drain", false, "exit once nothing is pending or undelivered (closed campaigns are refunded and settled on the way)")
	fs.StringVar(&c.redrive, "redrive", "", "first put the dead grants of this campaign back into its stream (after fixing their cause)")
	fs.StringVar(&c.consumer, "consumer", "", "consumer name in the settle group; must be stable across restarts (default: host name)")
	fs.StringVar(&c.only, "campaigns", "", "comma-separated campaign ids to settle (default: every registered campaign)")
	fs.BoolVar(&c.asJSON, "json", false, "print the final counters as JSON")
	fs.StringVar(&c.lease, "lease", "scheduler", "name of the scheduler lease: of the settle and serve processes sharing a name, one settles at a time, or with --settle-parts above 1 each its parts (--drain takes no lease unless --settle-parts is above 1)")
	fs.IntVar(&c.parts, "settle-parts", 1, "number of parts of the deployment's settlement, the same in every serve and settle process of it: above 1, each part (a share of every campaign's shards) is a lease of its own and up to this many processes settle at once, --drain too (docs/settlement.md); 1: one process settles everything")
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 10*time.Second, "lifetime of the scheduler lease; another process takes over this long after a holder dies")
	fs.DurationVar(&c.retention, "retention", 7*24*time.Hour, "how long a settled campaign's keys stay in Redis before they expire")
	fs.DurationVar(&c.drawLogRetention, "draw-log-retention", fairness.DefaultRetention, "how long after a campaign's refund its fairness draw data (salts) is kept before the sweep deletes it, as serve's --draw-log-retention (regulators ask for at least 90 days, 2160h); negative: for ever")
	fs.IntVar(&c.waitN, "wait-replicas", 0, "settle only grants this many replicas hold (WAIT before each ledger transaction); 0: off")
	fs.DurationVar(&c.waitTimeout, "wait-timeout", 500*time.Millisecond, "how long each WAIT for --wait-replicas may take")
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "send traces of the settlement batches (OpenTelemetry, OTLP over HTTP) to this collector URL, as serve does; default: off")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "serve /metrics (settlement counters, the scheduler lease and parts) and /healthz, without credentials, on this address (keep it private); with --drain, while it runs; default: off")
	declareLogFormat(fs, &c.logFormat)
	setUsage(fs, c.env, settleUsage)
	if err := parseFlags(fs, c.env, args); err != nil {
		return err
	}
	if err := checkLogFormat(c.logFormat); err != nil {
		return err
	}
	if c.metricsListen != "" {
		if _, _, err := net.SplitHostPort(c.metricsListen); err != nil {
			return usageErrorf("--metrics-listen %q: %v", c.metricsListen, err)
		}
	}
	if c.waitN < 0 || c.waitTimeout <= 0 {
		return usageErrorf("--wait-replicas must not be negative and --wait-timeout must be positive")
	}
	if err := c.redis.require(); err != nil {
		return err
	}
	if err := c.redis.checkNamespace(); err != nil {
		return err
	}
	if c.leaseTTL < 300*time.Millisecond || c.lease == "" || strings.ContainsAny(c.lease, "{}") {
		return usageErrorf("--lease-ttl must be at least 300ms, --lease not empty and without braces")
	}
	c.leaseTTL = c.leaseTTL.Truncate(time.Millisecond)
	if c.parts < 1 || c.parts > scheduler.MaxParts {
		return usageErrorf("--settle-parts must be 1-%d, not %d", scheduler.MaxParts, c.parts)
	}
	if c.reapEvery < 10*time.Millisecond {
		return usageErrorf("--reap-every must be at least 10ms")
	}
	if c.retention <= 0 {
		return usageErrorf("--retention must be positive, not %s", c.retention)
	}
	for _, id := range strings.Split(c.only, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		if err := hongbao.ValidateCampaignID(id); err != nil {
			return usageErrorf("--campaigns: %v", err)
		}
		c.campaigns = append(c.campaigns, id)
	}
	if c.redrive != "" {
		if err := hongbao.ValidateCampaignID(c.redrive); err != nil {
			return usageErrorf("--redrive: %v", err)
		}
	}
	if c.hook != "" && c.dsn != "" {
		return usageErrorf("give --ledger or --webhook, not both")
	}
	c.log = newLogger(c.env, c.logFormat)
	return nil
}

// open opens the sink (the webhook or the ledger), then Redis, makes the
// scheduler and serves its metrics.
func (c *settleCmd) open(ctx context.Context) error {
	log := c.log
	tr, stop, err := openTracer(ctx, c.env.Getenv, c.otlpEndpoint, "settle", func(err error) { log.Warn("tracing", "err", err) })
	if err != nil {
		return err
	}
	c.deferClose(stop)
	cfg := settle.Config{Namespace: c.redis.ns, Consumer: c.consumer, Logger: log, Only: c.campaigns, Retention: c.retention, DrawDataRetention: c.drawLogRetention,
		WaitReplicas: c.waitN, WaitTimeout: c.waitTimeout, Tracer: tr}
	if c.hook != "" {
		sink, err := openWebhook(c.hook, c.hookSecret, c.hookName, log)
		if err != nil {
			return err
		}
		cfg.Sink = sink
	} else {
		l, err := openLedger(ctx, c.dsn)
		if err != nil {
			return err
		}
		c.deferClose(func() { _ = l.Close() })
		cfg.Ledger, c.led = l, l
	}
	conn, err := c.redis.dial(ctx)
	if err != nil {
		return err
	}
	c.deferClose(conn.Close)
	cfg.Redis = conn.Client
	c.sched, err = scheduler.New(scheduler.Config{Settle: cfg, LeaseName: c.lease, LeaseTTL: c.leaseTTL, Parts: c.parts,
		ReapEvery: c.reapEvery, Logger: log})
	if err != nil {
		return usageErrorf("%v", err)
	}
	return c.listenMetrics()
}

// listenMetrics serves /metrics and /healthz on --metrics-listen, when
// given: what this process does (the settlement counters, the lease and
// the parts, as metrics.NewScheduler exports them), whether it reaches
// its ledger (hongbao_ledger_up; not with --webhook), its build
// (hongbao_build_info) and the Go runtime's.
func (c *settleCmd) listenMetrics() error {
	if c.metricsListen == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(readBuildInfo().collector(), metrics.NewScheduler(c.sched),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c.led != nil {
		reg.MustRegister(metrics.NewLedger(c.led.Ping))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		MaxRequestsInFlight: 4, ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 60 * time.Second}
	addr, err := c.listenAside(c.metricsListen, "metrics-listen", srv)
	if err != nil {
		return err
	}
	c.log.Info("metrics listening", "addr", addr.String())
	return nil
}

// run drains (with one part, the worker alone, without the lease: a drain
// is a one-off an operator runs; with several, this process's share of the
// parts until nothing is left in any), or runs the scheduler until
// interrupted: settlement, close on time, refunds and roll-ups while this
// process holds the lease or its parts. A drain rolls the refunded
// campaigns up after it has drained everything, and reports that time
// apart ("rollup_seconds"): the drain's own figure is what settling took.
func (c *settleCmd) run(ctx context.Context) error {
	w := c.sched.Worker()
	if c.redrive != "" {
		n, err := w.Redrive(ctx, c.redrive)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.env.Stderr, "redrive: %d dead entries of %s are back in its grants stream\n", n, c.redrive)
	}
	start := time.Now()
	var took, rollTook time.Duration
	var err error
	if c.drain {
		_, err = c.sched.Drain(ctx)
		took = time.Since(start)
		if err == nil {
			_, err = w.RollUps(ctx)
			rollTook = time.Since(start) - took
		}
	} else if err = c.sched.Start(context.WithoutCancel(ctx)); err == nil {
		<-ctx.Done()
		c.sched.Stop()
	}
	if took == 0 {
		took = time.Since(start)
	}
	c.report(w.Stats(), took, rollTook)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// report prints the counters; took is the settling, rollTook the
// roll-ups a drain did after it.
func (c *settleCmd) report(st settle.Stats, took, rollTook time.Duration) {
	if c.asJSON {
		_ = json.NewEncoder(c.env.Stdout).Encode(map[string]any{
			"grants": st.Grants, "replayed": st.Replayed, "entries": st.Entries, "conflicts": st.Conflicts,
			"malformed": st.Malformed, "deleted": st.Deleted, "refunds": st.Refunds, "failures": st.Failures,
			"seconds": took.Seconds(), "rolled_up": st.RolledUp, "rollup_seconds": rollTook.Seconds(),
		})
		return
	}
	fmt.Fprintf(c.env.Stdout, "settled %d grants (%d replayed), %d entries, %d campaigns refunded; incidents: %d conflicts, %d malformed, %d deleted\n",
		st.Grants, st.Replayed, st.Entries, st.Refunds, st.Conflicts, st.Malformed, st.Deleted)
	if st.RolledUp > 0 {
		fmt.Fprintf(c.env.Stdout, "rolled up %d campaigns' balances in %.3fs\n", st.RolledUp, rollTook.Seconds())
	}
}

// openWebhook opens the sink of --webhook URL, its retries logged to log.
func openWebhook(url, secretFile, name string, log *slog.Logger) (*webhook.Sink, error) {
	if secretFile == "" {
		return nil, usageErrorf("--webhook needs --webhook-secret-file")
	}
	b, err := os.ReadFile(secretFile)
	if err != nil {
		return nil, usageErrorf("--webhook-secret-file: %v", err)
	}
	sink, err := webhook.New(webhook.Config{URL: url, Secret: bytes.TrimSpace(b), Name: name, Logger: log})
	if err != nil {
		return nil, usageErrorf("--webhook: %v", err)
	}
	return sink, nil
}

// reconcileCmd is "hongbao reconcile": one campaign in Redis against the
// ledger, or (--webhook) against a host's wallet, or (--balances) every
// balance of the ledger against its journal.
type reconcileCmd struct {
	base
	redis            redisFlags
	id               string
	discount         string
	dsn              string
	hook, hookSecret string
	hookName         string
	asJSON           bool
	balances         bool
	logFormat        string
	conn             *redisConn
	led              ledger.Ledger
	sink             *webhook.Sink
}

func newReconcileCmd(env *IO) command { return &reconcileCmd{base: base{env: env}} }

func (c *reconcileCmd) parseFlags(args []string) error {
	fs := newFlagSet("reconcile", c.env)
	fs.StringVar(&c.id, "campaign", "", "campaign id (this, --discount or --balances is required)")
	fs.StringVar(&c.discount, "discount", "", "discount campaign id, instead of --campaign")
	fs.BoolVar(&c.balances, "balances", false, "instead of a campaign, check every stored balance of the ledger against its journal (reads only the ledger)")
	c.redis.declare(fs, "required with --campaign or --discount", false)
	c.redis.declareNamespace(fs)
	fs.StringVar(&c.dsn, "ledger", "", "ledger: sqlite:PATH or postgres://... (this or --webhook is required)")
	fs.StringVar(&c.hook, "webhook", "", "instead of a ledger, ask the host's wallet at this URL what it holds of the campaign (a signed totals event) and compare that with Redis")
	fs.StringVar(&c.hookSecret, "webhook-secret-file", "", "file holding the webhook's HMAC secret (at least 32 bytes; surrounding whitespace is trimmed)")
	fs.StringVar(&c.hookName, "webhook-name", "", "the name of the wallet the webhook pays, as settle --webhook-name gives it; default: webhook:<the URL without credentials or query>")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON")
	declareLogFormat(fs, &c.logFormat)
	setUsage(fs, c.env, reconcileUsage)
	operands, err := parseOperands(fs, c.env, args)
	if err != nil {
		return err
	}
	if err := checkLogFormat(c.logFormat); err != nil {
		return err
	}
	if err := c.campaignOperand(operands); err != nil {
		return err
	}
	if c.balances {
		return c.balancesFlags()
	}
	if c.hook != "" {
		return c.webhookFlags()
	}
	if c.discount != "" {
		if c.id != "" {
			return usageErrorf("give --campaign or --discount, not both")
		}
		if err := hongbao.ValidateCampaignID(c.discount); err != nil {
			return usageErrorf("--discount: %v", err)
		}
		return c.redis.require()
	}
	if err := hongbao.ValidateCampaignID(c.id); err != nil {
		return usageErrorf("--campaign: %v", err)
	}
	return c.redis.require()
}

// open opens the ledger, which must exist (openExistingLedger), and then,
// for a campaign, Redis: a ledger that is not there fails before any
// network call.
func (c *reconcileCmd) open(ctx context.Context) error {
	if c.hook != "" {
		return c.openSink(ctx)
	}
	if err := c.openLedger(ctx); err != nil || c.balances {
		return err
	}
	conn, err := c.redis.dial(ctx)
	if err != nil {
		return err
	}
	c.deferClose(conn.Close)
	c.conn = conn
	return nil
}

func (c *reconcileCmd) run(ctx context.Context) error {
	if c.balances {
		return c.checkBalances(ctx)
	}
	if c.hook != "" {
		return c.reconcileWebhook(ctx)
	}
	reconcile := settle.Reconcile
	id := c.id
	if c.discount != "" {
		reconcile, id = settle.ReconcileDiscount, c.discount
	}
	rep, err := reconcile(ctx, c.conn.Client, c.redis.ns, c.led, id)
	if err != nil {
		return err
	}
	printReconcile(c.env, rep, c.asJSON)
	if !rep.OK {
		return &exitError{code: 1, err: fmt.Errorf("%d differences", rep.DifferenceCount)}
	}
	return nil
}

func printReconcile(env *IO, rep *settle.Report, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(env.Stdout).Encode(rep)
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(env.Stdout, f, a...) }
	p("Reconcile %s (%s), total %s\n", rep.Campaign, rep.State, hongbao.FormatCents(rep.TotalCents))
	p("  grants   Redis %d (%s)   ledger %d (%s)\n", rep.GrantedRedis, hongbao.FormatCents(rep.GrantedCentsRedis),
		rep.GrantedLedger, hongbao.FormatCents(rep.GrantedCentsLedger))
	p("  fund %s   refund %s   escrow %s   pool %s   dead %d   unsettled %d\n",
		hongbao.FormatCents(rep.FundCents), hongbao.FormatCents(rep.RefundCents), hongbao.FormatCents(rep.EscrowCents),
		hongbao.FormatCents(rep.PoolCents), rep.Dead, rep.Unsettled)
	if rep.CommitmentRoot != "" {
		p("  commitment root %s: the ledger's packets and salts hash to it\n", rep.CommitmentRoot)
	}
	printVerdict(env.Stdout, rep.OK, "  OK: Redis and the ledger agree to the cent",
		fmt.Sprintf("  %d differences:", rep.DifferenceCount), rep.Differences)
}

// printVerdict prints the line ok, or the line failed and then the
// problems, one a line.
func printVerdict(w io.Writer, ok bool, okLine, failed string, problems []string) {
	if ok {
		fmt.Fprintln(w, okLine)
		return
	}
	fmt.Fprintln(w, failed)
	for _, p := range problems {
		fmt.Fprintf(w, "    - %s\n", p)
	}
}
