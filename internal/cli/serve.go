package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/leader"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

func init() {
	register("serve", "run the HTTP service: the /v1 API, settlement and the scheduler", runServe)
	register("token", "mint a user token (HS256 JWT) from the configured secret, for tests and demos", runToken)
}

type serveFlags struct {
	listen, redis, redisServer, ledger, dataDir, pprof, consumer, logFormat string
	adminKeys, tokenSecrets                                                 fileList
	allowEviction                                                           bool
	userRate, ipRate                                                        float64
	userBurst, ipBurst                                                      int
	globalRate                                                              int64
	shutdownTimeout, leaseTTL                                               time.Duration
}

func runServe(ctx context.Context, io *IO, args []string) error {
	var f serveFlags
	fs := newFlagSet("serve", io)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the API on")
	fs.StringVar(&f.redis, "redis", "", "Redis URL (redis://host:port); default: start a durable redis-server (appendfsync always) in --data-dir")
	fs.StringVar(&f.redisServer, "redis-server", "redis-server", "redis-server binary for the embedded default")
	fs.StringVar(&f.ledger, "ledger", "", "ledger: sqlite:PATH or postgres://...; default: sqlite in --data-dir")
	fs.StringVar(&f.dataDir, "data-dir", "hongbao-data", "directory for the embedded Redis, the SQLite ledger and generated secrets")
	fs.Var(&f.adminKeys, "admin-key-file", "file holding an admin key (at least 32 bytes); repeat for several keys; default: <data-dir>/admin.key, generated if missing")
	fs.Var(&f.tokenSecrets, "token-secret-file", "file holding an HS256 user token secret (at least 32 bytes), as [kid=]PATH; repeat for rotation, the first also verifies tokens without kid; default: <data-dir>/token.secret, generated if missing")
	fs.BoolVar(&f.allowEviction, "allow-eviction", false, "start even when Redis's maxmemory-policy can evict keys (an evicted claim is a double grant) or cannot be read")
	fs.StringVar(&f.pprof, "pprof-listen", "", "serve net/http/pprof on this separate address (keep it private); default: off")
	fs.StringVar(&f.consumer, "consumer", "", "settlement consumer name, stable across restarts; default: serve-<host>-<listen port>")
	fs.Float64Var(&f.userRate, "user-rate", 5, "requests per second per user (negative: no limit)")
	fs.IntVar(&f.userBurst, "user-burst", 10, "burst of the per-user limit")
	fs.Float64Var(&f.ipRate, "ip-rate", 0, "requests per second per client address (0: no limit)")
	fs.IntVar(&f.ipBurst, "ip-burst", 0, "burst of the per-address limit (default: the rate)")
	fs.Int64Var(&f.globalRate, "global-rate", 0, "API requests per second over every serve process sharing the Redis (0: no limit)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a shutdown waits for in-flight requests")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "lifetime of the scheduler lease; another process takes over this long after a holder dies")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.Usage = func() {
		fmt.Fprintln(io.Stderr, "Usage: hongbao serve [flags]\n\nEvery flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_LISTEN=127.0.0.1:9000;\nrepeatable flags take comma-separated values there.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, io, args); err != nil {
		return err
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return usageErrorf("--log-format must be text or json")
	}
	if io.Getenv("GOGC") == "" {
		// The live heap is small (tens of MB) while every request
		// allocates (HTTP, tokens, limits), so Go's default GOGC=100 runs a
		// collection every few thousand requests. Collecting at 4x the
		// live heap costs little memory and cuts the collector's share of
		// the CPU. GOGC in the environment wins.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	if f.leaseTTL < 300*time.Millisecond {
		return usageErrorf("--lease-ttl must be at least 300ms")
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usageErrorf("--listen %q: %v", f.listen, err)
	}
	var log *slog.Logger
	if f.logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(io.Stderr, nil))
	} else {
		log = slog.New(slog.NewTextHandler(io.Stderr, nil))
	}

	// Secrets first: a bad file is a usage error before anything starts.
	if len(f.adminKeys) == 0 || len(f.tokenSecrets) == 0 {
		if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
	}
	if len(f.adminKeys) == 0 {
		p := filepath.Join(f.dataDir, defaultAdminKeyFile)
		created, err := ensureSecretFile(p)
		if err != nil {
			return fmt.Errorf("admin key: %w", err)
		}
		if created {
			log.Warn("no --admin-key-file: generated an admin key", "file", p)
		}
		f.adminKeys = fileList{p}
	}
	if len(f.tokenSecrets) == 0 {
		p := filepath.Join(f.dataDir, defaultTokenSecretFile)
		created, err := ensureSecretFile(p)
		if err != nil {
			return fmt.Errorf("token secret: %w", err)
		}
		if created {
			log.Warn("no --token-secret-file: generated a user token secret", "file", p)
		}
		f.tokenSecrets = fileList{p}
	}
	var adminKeys [][]byte
	for _, p := range f.adminKeys {
		k, err := readSecretFile("admin-key-file", p)
		if err != nil {
			return err
		}
		adminKeys = append(adminKeys, k)
	}
	secrets, err := tokenSecrets(f.tokenSecrets)
	if err != nil {
		return err
	}

	// Redis: given, or our own durable redis-server; never the emulator.
	conn, err := connectRedis(ctx, io, f.redis, redisOptions{Server: redisserver.Options{
		Bin: f.redisServer, Dir: filepath.Join(f.dataDir, "redis"),
	}})
	if err != nil {
		return err
	}
	// The managed Redis stops last: this deferred call runs after every
	// other cleanup below.
	defer conn.Close()
	if err := checkRedis(ctx, log, conn, f.allowEviction); err != nil {
		return err
	}

	dsn := f.ledger
	if dsn == "" {
		if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		dsn = "sqlite:" + filepath.Join(f.dataDir, "ledger.db")
	}
	led, err := openLedger(ctx, dsn)
	if err != nil {
		return err
	}
	defer led.Close()

	eng, err := hongbao.New(hongbao.Config{Redis: conn.Client})
	if err != nil {
		return err
	}
	consumer := f.consumer
	if consumer == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(f.listen)
		consumer = "serve-" + strings.Map(func(r rune) rune {
			if r == ' ' || r == ':' {
				return '-'
			}
			return r
		}, host) + "-" + port
	}
	worker, err := settle.New(settle.Config{Redis: conn.Client, Ledger: led, Consumer: consumer, Logger: log})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	leaseHeld := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hongbao_scheduler_lease_held",
		Help: "1 while this process holds the scheduler lease (runs settlement, closes on time and refunds).",
	})
	reg.MustRegister(leaseHeld)
	api, err := httpapi.New(httpapi.Config{
		Engine: eng, Redis: conn.Client, UserSecrets: secrets, AdminKeys: adminKeys,
		Ready: map[string]func(context.Context) error{"ledger": led.Ping},
		Retired: func(ctx context.Context, id string) (bool, error) {
			t, err := led.Totals(ctx, id)
			return t.Funded > 0, err
		},
		Fund: func(ctx context.Context, c *hongbao.Campaign) error {
			return led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total})
		},
		SettleStats: worker.Stats,
		UserRate:    f.userRate, UserBurst: f.userBurst, IPRate: f.ipRate, IPBurst: f.ipBurst, GlobalRate: f.globalRate,
		Logger: log, Registry: reg,
	})
	if err != nil {
		return usageErrorf("%v", err)
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// Requests must not end when the signal comes: in-flight grabs
		// finish during the shutdown.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()

	var pprofSrv *http.Server
	if f.pprof != "" {
		pln, err := net.Listen("tcp", f.pprof)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("--pprof-listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		pprofSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = pprofSrv.Serve(pln) }()
		log.Info("pprof listening", "addr", pln.Addr().String())
	}

	// The scheduler: the lease holder runs the settlement worker, whose
	// passes settle grants, close campaigns whose window ended and refund
	// drained ones. (Opening needs no action: the scripts compare opens_at
	// with the Redis clock.) Several workers would be safe too, by the
	// consumer group and the ledger's idempotency; the lease keeps the
	// work and the incidents in one place.
	elector, err := leader.New(leader.Config{
		Redis: conn.Client, Name: redisstore.SchedulerLease, TTL: f.leaseTTL, Logger: log,
		OnElected: func(ctx context.Context, term leader.Term) {
			log.Info("scheduler lease acquired: running settlement", "consumer", consumer, "token", term.Token)
			leaseHeld.Set(1)
			// The worker's passes outlive the term: on a loss the pass in
			// flight finishes (within the shutdown timeout), so neither a
			// loss nor a shutdown leaves a half-done batch behind.
			if err := worker.Start(context.WithoutCancel(ctx)); err != nil {
				log.Error("settlement did not start", "err", err)
			}
			<-ctx.Done()
			worker.StopAfterPass(f.shutdownTimeout)
			leaseHeld.Set(0)
			log.Info("scheduler lease released: settlement stopped after its current pass", "consumer", consumer)
		},
	})
	if err != nil {
		_ = srv.Close()
		return usageErrorf("--lease-ttl: %v", err)
	}
	if err := elector.Start(context.WithoutCancel(ctx)); err != nil {
		_ = srv.Close()
		return err
	}

	log.Info("serving", "addr", ln.Addr().String(), "redis", conn.Kind, "redis_addr", conn.Addr,
		"ledger", ledgerKind(dsn), "data_dir", f.dataDir, "consumer", consumer)
	fmt.Fprintf(io.Stdout, "hongbao serve: listening on http://%s\n", ln.Addr())

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new connections; finishing in-flight requests")
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	}
	// Order: stop taking requests and finish the ones in flight (their
	// grabs complete in Redis and are answered), then stop the scheduler
	// after its current batch, then the ledger, then Redis (deferred
	// above, so it is last).
	api.Stopping()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown: in-flight requests did not finish in time", "err", err)
		_ = srv.Close()
		if runErr == nil {
			runErr = errors.New("shutdown timed out with requests in flight")
		}
	}
	if pprofSrv != nil {
		_ = pprofSrv.Close()
	}
	elector.Stop()
	st := worker.Stats()
	log.Info("stopped", "settled_grants", st.Grants, "refunds", st.Refunds, "conflicts", st.Conflicts)
	return runErr
}

// checkRedis refuses a Redis that may evict keys and warns about one that
// does not fsync every write.
func checkRedis(ctx context.Context, log *slog.Logger, conn *redisConn, allowEviction bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	policy, err := redisstore.ConfigGet(ctx, conn.Client, "maxmemory-policy")
	switch {
	case err != nil && !allowEviction:
		return fmt.Errorf("cannot read Redis's maxmemory-policy (%v); if it is noeviction, pass --allow-eviction to skip the check", err)
	case err != nil:
		log.Warn("cannot read Redis's maxmemory-policy; --allow-eviction given", "err", err)
	case policy != "noeviction" && !allowEviction:
		return fmt.Errorf("the Redis maxmemory-policy is %q: it may evict keys, and an evicted claim is a double grant; set it to noeviction (or pass --allow-eviction)", policy)
	case policy != "noeviction":
		log.Warn("Redis may evict keys (--allow-eviction given): an evicted claim is a double grant", "maxmemory_policy", policy)
	}
	switch p, err := redisstore.Persistence(ctx, conn.Client); {
	case err != nil:
		log.Warn("cannot read Redis's AOF settings; acknowledged grants survive a Redis crash only with appendonly yes and appendfsync always")
	case p != "always":
		log.Warn("Redis is not fsync-always: a Redis crash can lose acknowledged grants (set appendonly yes, appendfsync always)",
			"persistence", p)
	}
	return nil
}

// ledgerKind names a ledger without its DSN (which may hold a password).
func ledgerKind(dsn string) string {
	if strings.HasPrefix(dsn, "postgres") {
		return "postgres"
	}
	return "sqlite"
}

func runToken(ctx context.Context, io *IO, args []string) error {
	fs := newFlagSet("token", io)
	user := fs.String("user", "", "user id, the token's sub (required)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	var secretsFlag fileList
	fs.Var(&secretsFlag, "token-secret-file", "file holding the secret, as [kid=]PATH (the first is used); default: <data-dir>/token.secret")
	dataDir := fs.String("data-dir", "hongbao-data", "serve's data directory, for the default secret")
	if err := parseFlags(fs, io, args); err != nil {
		return err
	}
	if err := hongbao.ValidateUserID(*user); err != nil {
		return usageErrorf("--user: %v", err)
	}
	if *ttl <= 0 {
		return usageErrorf("--ttl must be positive")
	}
	if len(secretsFlag) == 0 {
		secretsFlag = fileList{filepath.Join(*dataDir, defaultTokenSecretFile)}
	}
	secrets, err := tokenSecrets(secretsFlag[:1])
	if err != nil {
		return err
	}
	tok, err := httpapi.MintToken(secrets[0], *user, *ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(io.Stdout, tok)
	return nil
}
