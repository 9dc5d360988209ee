package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/httpapi/web"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/split"
)

// serveCmd is "hongbao serve": the HTTP API, and settlement under the
// scheduler lease.
type serveCmd struct {
	base
	f   serveFlags
	log *slog.Logger

	adminKeys   [][]byte
	paymentKeys [][]byte
	gatewayKeys [][]byte
	metricsKeys [][]byte
	secrets     []httpapi.Secret
	receipts    *fairness.Signer
	conn        *redisConn
	dsn         string
	led         ledger.Ledger
	consumer    string
	eng         *hongbao.Engine
	sched       *scheduler.Scheduler // nil with --settle=false
	api         *httpapi.Server
	srv         *http.Server
	ln          net.Listener
	served      chan error // what srv.Serve returned
	pprof       *http.Server
	metricsSrv  *http.Server
	tracer      trace.Tracer // nil: tracing off

	// demo, when not nil, turns on the API's demo mode (demo --web).
	demo *httpapi.Demo
	// announce, when not nil, tells the user where the service listens,
	// instead of serve's line.
	announce func(addr net.Addr)
}

type serveFlags struct {
	redis                                               redisFlags
	listen, ledger, dataDir, pprof, consumer, logFormat string
	adminKeys, paymentKeys, tokenSecrets, playEmbedders fileList
	metricsKeys, trustedProxies, gatewayKeys            fileList
	receiptKeys                                         fileList
	drawLogRetention                                    time.Duration
	proxies                                             []netip.Prefix // trustedProxies, read
	metricsListen, tlsCert, tlsKey                      string
	metricsPprof                                        bool
	tokenIssuer, tokenAudience                          string
	tokenMaxAge                                         time.Duration
	allowEviction                                       bool
	userRate, ipRate, authFailRate                      float64
	userBurst, ipBurst, authFailBurst                   int
	globalRate                                          int64
	shutdownDelay, shutdownTimeout, leaseTTL, reapEvery time.Duration
	waitReplicas, settleParts, maxCount                 int
	waitTimeout                                         time.Duration
	settle                                              bool
	maxBacklog                                          int64
	otlpEndpoint                                        string
}

func newServeCmd(env *IO) command { return &serveCmd{base: base{env: env}} }

func (f *serveFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the API on")
	f.redis.declare(fs, "default: start a durable redis-server (appendfsync always) in --data-dir", true)
	f.redis.declareNamespace(fs)
	fs.StringVar(&f.ledger, "ledger", "", "ledger: sqlite:PATH or postgres://...; default: sqlite in --data-dir")
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the embedded Redis, the SQLite ledger and generated secrets")
	fs.Var(&f.adminKeys, "admin-key-file", "file holding an admin key (at least 32 bytes); repeat for several keys; default: <data-dir>/admin.key, generated if missing")
	fs.Var(&f.paymentKeys, "payment-key-file", "file holding a payment system key (at least 32 bytes): it reserves, confirms and cancels discounts for the user named in the body (an admin key does too); repeat for several keys; default: none")
	fs.StringVar(&f.tlsCert, "tls-cert-file", "", "serve the API over HTTPS with this certificate (PEM, the chain after the leaf); with --tls-key-file; default: plain HTTP (TLS at the gateway)")
	fs.StringVar(&f.tlsKey, "tls-key-file", "", "the private key of --tls-cert-file (PEM)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, without credentials, on this separate address (keep it private); default: off")
	fs.BoolVar(&f.metricsPprof, "metrics-pprof", false, "serve net/http/pprof on the --metrics-listen address too")
	fs.Var(&f.gatewayKeys, "gateway-key-file", "file holding a gateway key (at least 32 bytes): a platform's access layer grabs for the users it authenticated, in batches (POST /v1/campaigns/{id}/grabs; an admin key does too); repeat for several keys; default: none")
	fs.Var(&f.metricsKeys, "metrics-key-file", "file holding a key (at least 32 bytes) that may read /metrics on the API address (an admin key may too); repeat for several; default: none")
	fs.StringVar(&f.tokenIssuer, "token-issuer", "", "user tokens must carry this iss; default: not checked")
	fs.StringVar(&f.tokenAudience, "token-audience", "", "user tokens must carry this aud (then required); default: not checked")
	fs.DurationVar(&f.tokenMaxAge, "token-max-age", 24*time.Hour, "longest lifetime of a user token (exp - iat); a token signed for longer is refused")
	fs.Var(&f.tokenSecrets, "token-secret-file", "file holding an HS256 user token secret (at least 32 bytes), as [kid=]PATH; repeat for rotation, the first also verifies tokens without kid; default: <data-dir>/token.secret, generated if missing")
	fs.BoolVar(&f.allowEviction, "allow-eviction", false, "start even when Redis's maxmemory-policy can evict keys (an evicted claim is a double grant) or cannot be read")
	fs.StringVar(&f.pprof, "pprof-listen", "", "serve net/http/pprof on this separate address (keep it private); default: off")
	fs.StringVar(&f.consumer, "consumer", "", "settlement consumer name, stable across restarts; default: serve-<host>-<listen port>")
	fs.Float64Var(&f.userRate, "user-rate", 5, "requests per second per user (negative: no limit)")
	fs.IntVar(&f.userBurst, "user-burst", 10, "burst of the per-user limit")
	fs.Float64Var(&f.ipRate, "ip-rate", 0, "requests per second per client address (0: no limit)")
	fs.IntVar(&f.ipBurst, "ip-burst", 0, "burst of the per-address limit (default: the rate)")
	fs.Var(&f.trustedProxies, "trusted-proxy", "a network (CIDR, or one address) of the proxies in front of serve (the gateway, a load balancer): from a peer in it the client address of the per-address limits and the logs is the right-most X-Forwarded-For entry that is not a trusted proxy; repeat for several; default: none, the client is the TCP peer and X-Forwarded-For is ignored")
	fs.Int64Var(&f.globalRate, "global-rate", 0, "API requests per second over every serve process sharing the Redis, spent only by requests that authenticated (0: no limit)")
	fs.Float64Var(&f.authFailRate, "auth-fail-rate", 5, "failed authentications per second per client address (IPv6: per /64); past it and its burst the address is answered 429 (negative: no limit)")
	fs.IntVar(&f.authFailBurst, "auth-fail-burst", 50, "burst of the failed-authentication limit")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM or SIGINT, answer /readyz 503 for this long while serving every other request as before, so that load balancers stop sending requests before the listener closes; a second signal skips the rest of it; 0: close at once")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "after --shutdown-delay, how long a shutdown waits for in-flight requests")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "lifetime of the scheduler lease; another process takes over this long after a holder dies")
	fs.DurationVar(&f.reapEvery, "reap-every", time.Second, "how often the scheduler expires discount reservations whose hold has passed")
	fs.BoolVar(&f.settle, "settle", true, "run the scheduler (settlement, close on time, refunds, the discount reaper) under the lease; false: the API alone, for deployments that run hongbao settle as its own process")
	fs.IntVar(&f.settleParts, "settle-parts", 1, "number of parts of the deployment's settlement, the same in every serve and settle process of it: above 1, each part (a share of every campaign's shards) is a lease of its own and up to this many processes settle at once (docs/settlement.md); 1: one process settles everything")
	fs.IntVar(&f.maxCount, "max-count", 1_000_000, "most packets of one red packet campaign, and the largest quota of one discount campaign, created over the API; at most "+strconv.Itoa(split.MaxCount)+" (what the split takes)")
	fs.Int64Var(&f.maxBacklog, "max-backlog", 0, "answer grabs of a campaign busy (503) while more than this many of its grant batches wait for settlement; read once a second; 0: no bound")
	declareLogFormat(fs, &f.logFormat)
	fs.IntVar(&f.waitReplicas, "wait-replicas", 0, "answer a grant only once this many replicas hold it (WAIT after each batch), and settle only what they hold; a short WAIT answers 503; pair with Redis's min-replicas-to-write (docs/durability.md); 0: off")
	fs.DurationVar(&f.waitTimeout, "wait-timeout", 500*time.Millisecond, "how long each WAIT for --wait-replicas may take (below 5s)")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "send traces (OpenTelemetry, OTLP over HTTP) to this collector URL, as http://127.0.0.1:4318; the OTEL_* environment variables set the rest, and OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on too; default: off")
	fs.Var(&f.receiptKeys, "receipt-key-file", "file holding the Ed25519 key that signs grant receipts (a PEM PKCS #8 private key, or its 32-byte seed as 64 hex digits), as [kid=]PATH (kid default: the key's RFC 7638 thumbprint); repeat for rotation: the first signs, all are published at /.well-known/jwks.json; default: <data-dir>/receipt.key, generated if missing, when the admin key is too (else no receipts)")
	fs.DurationVar(&f.drawLogRetention, "draw-log-retention", httpapi.DefaultDrawLogRetention, "how long after a campaign closed its draw log is served, and after its refund its draw data (salts) is kept before the settlement's sweep deletes it (regulators ask for at least 90 days, 2160h); negative: for ever")
	fs.Var(&f.playEmbedders, "play-embedder", "an origin (https://app.example.com) allowed to show the play page in a frame and pass it the user's token by postMessage; repeat for several; default: none")
}

func (s *serveCmd) parseFlags(args []string) error {
	fs := newFlagSet("serve", s.env)
	s.f.declare(fs)
	setUsage(fs, s.env, "Usage: hongbao serve [flags]\n\nEvery flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_LISTEN=127.0.0.1:9000;\nrepeatable flags take comma-separated values there. Both override --config.\n\nFlags:")
	if err := parseFlags(fs, s.env, args); err != nil {
		return err
	}
	f := &s.f
	if err := checkLogFormat(f.logFormat); err != nil {
		return err
	}
	if err := f.redis.checkNamespace(); err != nil {
		return err
	}
	if f.waitReplicas < 0 || f.waitTimeout <= 0 || f.waitTimeout >= hongbao.DefaultBatchTimeout {
		return usageErrorf("--wait-replicas must not be negative and --wait-timeout must be within 0 and %s (the engine's batch timeout)", hongbao.DefaultBatchTimeout)
	}
	if f.shutdownDelay < 0 || f.shutdownTimeout <= 0 {
		return usageErrorf("--shutdown-delay must not be negative and --shutdown-timeout must be positive")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageErrorf("--tls-cert-file and --tls-key-file go together")
	}
	if f.tlsCert != "" {
		if _, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey); err != nil {
			return usageErrorf("--tls-cert-file, --tls-key-file: %v", err)
		}
	}
	if f.metricsPprof && f.metricsListen == "" {
		return usageErrorf("--metrics-pprof needs --metrics-listen")
	}
	if f.tokenMaxAge <= 0 {
		return usageErrorf("--token-max-age must be positive")
	}
	if f.maxBacklog < 0 {
		return usageErrorf("--max-backlog must not be negative")
	}
	if f.maxCount < 1 || f.maxCount > split.MaxCount {
		return usageErrorf("--max-count must be 1-%d, not %d", split.MaxCount, f.maxCount)
	}
	ignored, err := f.checkSettle()
	if err != nil {
		return err
	}
	proxies, err := parseNetworks(f.trustedProxies)
	if err != nil {
		return usageErrorf("--trusted-proxy: %v", err)
	}
	f.proxies = proxies
	// Redis keeps whole milliseconds.
	f.leaseTTL = f.leaseTTL.Truncate(time.Millisecond)
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usageErrorf("--listen %q: %v", f.listen, err)
	}
	if _, err := web.New(web.Options{Embedders: f.playEmbedders}); err != nil {
		return usageErrorf("--play-embedder: %v", err)
	}
	s.log = newLogger(s.env, f.logFormat)
	if ignored != "" {
		s.log.Warn("--settle=false settles nothing: the settlement flags are not used", "ignored", ignored)
	}
	s.consumer = f.consumer
	if s.consumer == "" {
		s.consumer = defaultConsumer(f.listen)
	}
	return nil
}

// checkLogFormat checks a --log-format.
func checkLogFormat(format string) error {
	if format != "text" && format != "json" {
		return usageErrorf("--log-format must be text or json")
	}
	return nil
}

// newLogger logs to env's stderr in format (text or json), durations as
// text (newLevelLogger).
func newLogger(env *IO, format string) *slog.Logger {
	return newLevelLogger(env, format, slog.LevelInfo)
}

// checkSettle checks the flags of the scheduler (--settle-parts,
// --lease-ttl, --reap-every). With --settle=false nothing uses them, so
// nothing about them stops serve: it answers what it would have refused,
// for a warning, instead.
func (f *serveFlags) checkSettle() (ignored string, err error) {
	switch {
	case f.settleParts < 1 || f.settleParts > scheduler.MaxParts:
		err = usageErrorf("--settle-parts must be 1-%d, not %d", scheduler.MaxParts, f.settleParts)
	case f.leaseTTL < 300*time.Millisecond:
		err = usageErrorf("--lease-ttl must be at least 300ms")
	case f.reapEvery < 10*time.Millisecond:
		err = usageErrorf("--reap-every must be at least 10ms")
	}
	if err != nil && !f.settle {
		return err.Error(), nil
	}
	return "", err
}

// parseNetworks reads networks written as CIDRs (10.0.0.0/8) or single
// addresses (10.0.0.2, a network of one).
func parseNetworks(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range list {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR network nor an address", v)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// defaultConsumer names the settlement consumer of a serve listening on
// listen: serve-<host>-<port>, stable across restarts.
func defaultConsumer(listen string) string {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(listen)
	return "serve-" + strings.Map(func(r rune) rune {
		if r == ' ' || r == ':' {
			return '-'
		}
		return r
	}, host) + "-" + port
}

// open starts everything in the order a request needs it: secrets, Redis,
// the ledger, the API and its listeners, then the scheduler. Redis is
// closed last.
func (s *serveCmd) open(ctx context.Context) error {
	if s.env.Getenv("GOGC") == "" {
		// The live heap is small (tens of MB) while every request
		// allocates (HTTP, tokens, limits), so Go's default GOGC=100 runs a
		// collection every few thousand requests. Collecting at 4x the
		// live heap costs little memory and cuts the collector's share of
		// the CPU. GOGC in the environment wins.
		old := debug.SetGCPercent(400)
		s.deferClose(func() { debug.SetGCPercent(old) })
	}
	// Secrets first: a bad file is a usage error before anything starts.
	if err := s.loadSecrets(); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{s.openTracing, s.openRedis, s.openLedger, s.newAPI, s.listen, s.listenPprof, s.listenMetrics, s.startScheduler} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// openTracing starts the trace exporter when --otlp-endpoint or the
// OTEL_* environment asks for one; it is flushed at the very end.
func (s *serveCmd) openTracing(ctx context.Context) error {
	tr, stop, err := openTracer(ctx, s.env.Getenv, s.f.otlpEndpoint, "serve",
		func(err error) { s.log.Warn("tracing", "err", err) })
	if err != nil {
		return err
	}
	s.tracer = tr
	s.deferClose(stop)
	if tr != nil {
		s.log.Info("tracing on", "otlp_endpoint", s.f.otlpEndpoint)
	}
	return nil
}

// loadSecrets reads the admin keys and token secrets, generating the
// default files in the data directory when none are given.
func (s *serveCmd) loadSecrets() error {
	f := &s.f
	generated := len(f.adminKeys) == 0
	if len(f.adminKeys) == 0 {
		p, err := s.defaultSecret(defaultAdminKeyFile, "admin key", "no --admin-key-file: generated an admin key")
		if err != nil {
			return err
		}
		f.adminKeys = fileList{p}
	}
	if len(f.tokenSecrets) == 0 {
		p, err := s.defaultSecret(defaultTokenSecretFile, "token secret", "no --token-secret-file: generated a user token secret")
		if err != nil {
			return err
		}
		f.tokenSecrets = fileList{p}
	}
	for _, p := range f.adminKeys {
		k, err := readSecretFile("admin-key-file", p)
		if err != nil {
			return err
		}
		s.adminKeys = append(s.adminKeys, k)
	}
	for _, p := range f.paymentKeys {
		k, err := readSecretFile("payment-key-file", p)
		if err != nil {
			return err
		}
		s.paymentKeys = append(s.paymentKeys, k)
	}
	for _, p := range f.gatewayKeys {
		k, err := readSecretFile("gateway-key-file", p)
		if err != nil {
			return err
		}
		s.gatewayKeys = append(s.gatewayKeys, k)
	}
	for _, p := range f.metricsKeys {
		k, err := readSecretFile("metrics-key-file", p)
		if err != nil {
			return err
		}
		s.metricsKeys = append(s.metricsKeys, k)
	}
	if err := s.loadReceiptKeys(generated); err != nil {
		return err
	}
	var err error
	s.secrets, err = tokenSecrets(f.tokenSecrets)
	return err
}

// loadReceiptKeys reads --receipt-key-file values, each "[kid=]path"
// (keySpec).
// With none given, a serve that generated its admin key (a newcomer's,
// all in its data directory) generates the receipt key there too; one
// given its secrets signs no receipts (and says so): processes of one
// deployment each generating a key would publish different key sets.
func (s *serveCmd) loadReceiptKeys(newcomer bool) error {
	f := &s.f
	if len(f.receiptKeys) == 0 && !newcomer {
		s.log.Warn("no --receipt-key-file: grant receipts are not signed (the receipt route answers not_found, /.well-known/jwks.json is empty)")
		return nil
	}
	if len(f.receiptKeys) == 0 {
		p, err := s.defaultSecret(defaultReceiptKeyFile, "receipt key", "no --receipt-key-file: generated a receipt signing key")
		if err != nil {
			return err
		}
		f.receiptKeys = fileList{p}
	}
	var keys []fairness.ReceiptKey
	for _, spec := range f.receiptKeys {
		kid, path, err := keySpec("receipt-key-file", spec)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return usageErrorf("--receipt-key-file: %v", err)
		}
		k, err := fairness.ParseReceiptKey(kid, b)
		if err != nil {
			return usageErrorf("--receipt-key-file %s: %v", path, err)
		}
		keys = append(keys, k)
	}
	signer, err := fairness.NewSigner(keys)
	if err != nil {
		return usageErrorf("--receipt-key-file: %v", err)
	}
	s.receipts = signer
	return nil
}

// defaultSecret returns the path of the secret file name in the data
// directory, generating the secret when the file is missing.
func (s *serveCmd) defaultSecret(name, what, generated string) (string, error) {
	if err := os.MkdirAll(s.f.dataDir, 0o700); err != nil {
		return "", fmt.Errorf("--data-dir: %w", err)
	}
	p := filepath.Join(s.f.dataDir, name)
	created, err := ensureSecretFile(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if created {
		s.log.Warn(generated, "file", p)
	}
	return p, nil
}

// openRedis connects to --redis, or starts our own durable redis-server;
// never the emulator.
func (s *serveCmd) openRedis(ctx context.Context) error {
	so := redisserver.Options{Dir: filepath.Join(s.f.dataDir, "redis")}
	if s.f.redis.url == "" {
		// The embedded Redis is locked with a password kept beside
		// admin.key (0600), so an operator can reach it with redis-cli.
		p, err := s.defaultSecret(defaultRedisPassFile, "redis password", "generated the embedded Redis's password")
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("redis password: %w", err)
		}
		so.Password = strings.TrimSpace(string(b))
	}
	conn, err := s.f.redis.connect(ctx, s.env, redisOptions{Server: so})
	if err != nil {
		return err
	}
	s.conn = conn
	s.deferClose(conn.Close)
	if err := checkRedis(ctx, s.log, conn, s.f.allowEviction); err != nil {
		return err
	}
	checkReplicas(ctx, s.log, conn, s.f.waitReplicas)
	return nil
}

// checkReplicas says what --wait-replicas n will meet: a primary that
// takes writes with fewer than n good replicas (without
// min-replicas-to-write n each such grab waits out --wait-timeout, then
// answers 503) and too few replicas now.
func checkReplicas(ctx context.Context, log *slog.Logger, conn *redisConn, n int) {
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if v, err := redisstore.ConfigGet(ctx, conn.Client, "min-replicas-to-write"); err == nil {
		if m, _ := strconv.Atoi(v); m < n {
			log.Warn("Redis takes writes with fewer good replicas than --wait-replicas: then every grab waits out --wait-timeout and answers 503; set min-replicas-to-write to refuse them at once",
				"wait_replicas", n, "min_replicas_to_write", m)
		}
	}
	info, err := conn.Client.Do(ctx, conn.Client.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			if c, _ := strconv.Atoi(v); c < n {
				log.Warn("fewer replicas follow Redis than --wait-replicas: grabs answer 503 and /readyz says not ready until they do", "wait_replicas", n, "replicas", c)
			}
		}
	}
}

func (s *serveCmd) openLedger(ctx context.Context) error {
	s.dsn = s.f.ledger
	if s.dsn == "" {
		if err := os.MkdirAll(s.f.dataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		s.dsn = "sqlite:" + filepath.Join(s.f.dataDir, "ledger.db")
	}
	led, err := openLedger(ctx, s.dsn)
	if err != nil {
		return err
	}
	s.led = led
	s.deferClose(func() { _ = led.Close() })
	return nil
}

// newAPI builds the engine, the settlement worker and the HTTP API.
func (s *serveCmd) newAPI(context.Context) error {
	f := &s.f
	// The ledger records every packet (and the campaign's terms) before
	// a campaign goes live: what hongbao rebuild restores from.
	eng, err := hongbao.New(hongbao.Config{Redis: s.conn.Client, Namespace: f.redis.ns, Packets: s.led,
		WaitReplicas: f.waitReplicas, WaitTimeout: f.waitTimeout, Tracer: s.tracer, Logger: s.log})
	if err != nil {
		return err
	}
	s.eng = eng
	if f.settle {
		if err := s.newScheduler(); err != nil {
			return err
		}
	}
	led := s.led
	s.api, err = httpapi.New(httpapi.Config{
		Engine: eng, Settlement: settle.NewBacklogs(s.conn.Client, f.redis.ns), UserSecrets: s.secrets, AdminKeys: s.adminKeys, PaymentKeys: s.paymentKeys, GatewayKeys: s.gatewayKeys, MetricsKeys: s.metricsKeys,
		Token: httpapi.TokenScope{Issuer: f.tokenIssuer, Audience: f.tokenAudience, MaxAge: f.tokenMaxAge},
		// A ledger outage degrades the API (no creates, no new blocks of
		// packets) and does not take it out of service: /readyz reports
		// it and stays 200 while Redis grants.
		Degraded: map[string]func(context.Context) error{"ledger": led.Ping},
		Retired: func(ctx context.Context, id string) (bool, error) {
			t, err := led.Totals(ctx, id)
			return t.Funded > 0, err
		},
		Fund: func(ctx context.Context, c *hongbao.Campaign) error {
			return led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total})
		},
		SettledCents: func(ctx context.Context, id string) (int64, error) {
			t, err := led.Totals(ctx, id)
			return t.GrantCents, err
		},
		MaxCount: f.maxCount, UserRate: f.userRate, UserBurst: f.userBurst, IPRate: f.ipRate, IPBurst: f.ipBurst, GlobalRate: f.globalRate,
		AuthFailRate: f.authFailRate, AuthFailBurst: f.authFailBurst, TrustedProxies: f.proxies,
		Logger: s.log, Registry: s.registry(), Tracer: s.tracer,
		PlayEmbedders: f.playEmbedders, Demo: s.demo,
		Receipts: s.receipts, DrawLogRetention: f.drawLogRetention,
	})
	if err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// registry returns the registry of serve's metrics, hongbao_build_info
// first; the API adds its own and the engine's. Each process exports the metrics of the duties it
// performs: with the scheduler, its lease, parts and settlement counters
// (metrics.NewScheduler); with --settle=false none of them, so that no
// API process claims a missing scheduler (hongbao settle exports them).
// Every serve reaches the ledger (creates, blocks of the pop frontier):
// hongbao_ledger_up says whether it does.
func (s *serveCmd) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewLedger(s.led.Ping))
	reg.MustRegister(readBuildInfo().collector())
	if s.sched != nil {
		reg.MustRegister(metrics.NewScheduler(s.sched))
	}
	return reg
}

// listen starts serving the API.
func (s *serveCmd) listen(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.ln = ln
	var h http.Handler = s.api
	if host, _, _ := net.SplitHostPort(s.f.listen); isLoopbackHost(host) {
		h = loopbackOnly(h)
	}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// Requests must not end when the signal comes: in-flight grabs
		// finish during the shutdown.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	// HTTP/2 over TLS as net/http negotiates it; on plain HTTP also
	// HTTP/2 with prior knowledge (h2c), which gRPC clients speak, beside
	// HTTP/1.1 for everyone else.
	s.srv.Protocols = new(http.Protocols)
	s.srv.Protocols.SetHTTP1(true)
	s.srv.Protocols.SetHTTP2(true)
	s.served = make(chan error, 1)
	srv := s.srv
	if s.f.tlsCert != "" {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		go func() { s.served <- srv.ServeTLS(ln, s.f.tlsCert, s.f.tlsKey) }()
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
		go func() { s.served <- srv.Serve(ln) }()
	}
	s.deferClose(func() { _ = srv.Close() })
	return nil
}

// loopbackOnly guards a serve bound to loopback against DNS rebinding: a
// web page whose own name resolves to 127.0.0.1 could otherwise make the
// browser of someone on this machine talk to the API (or the console) as
// if from that page. Such a request carries the page's name in Host; only
// loopback names pass.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopbackHost(host) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"this server answers loopback names only (localhost, 127.0.0.1, [::1])"}}`+"\n", httpapi.CodeMisdirected)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost says whether host (no port) is a loopback name or
// address.
func isLoopbackHost(host string) bool {
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenPprof serves net/http/pprof on its own address, when asked.
func (s *serveCmd) listenPprof(context.Context) error {
	if s.f.pprof == "" {
		return nil
	}
	mux := http.NewServeMux()
	mountPprof(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	addr, err := s.listenAside(s.f.pprof, "pprof-listen", srv)
	if err != nil {
		return err
	}
	s.pprof = srv
	s.log.Info("pprof listening", "addr", addr.String())
	return nil
}

// listenAside serves srv on addr, a listener of its own beside the API's,
// until the command closes, and returns the address it listens on; flag
// names addr's flag in the error.
func (s *base) listenAside(addr, flag string, srv *http.Server) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	go func() { _ = srv.Serve(ln) }()
	s.deferClose(func() { _ = srv.Close() })
	return ln.Addr(), nil
}

func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// listenMetrics serves /metrics without credentials (and pprof, when
// asked) on its own address, for the monitoring network only.
func (s *serveCmd) listenMetrics(context.Context) error {
	if s.f.metricsListen == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.api.Metrics())
	if s.f.metricsPprof {
		mountPprof(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 60 * time.Second}
	addr, err := s.listenAside(s.f.metricsListen, "metrics-listen", srv)
	if err != nil {
		return err
	}
	s.metricsSrv = srv
	s.log.Info("metrics listening", "addr", addr.String(), "pprof", s.f.metricsPprof)
	return nil
}

func (s *serveCmd) run(ctx context.Context) error {
	s.log.Info("serving", "addr", s.ln.Addr().String(), "redis", s.conn.Kind, "redis_addr", s.conn.Addr,
		"ledger", ledgerKind(s.dsn), "data_dir", s.f.dataDir, "consumer", s.consumer, "wait_replicas", s.f.waitReplicas)
	if s.announce != nil {
		s.announce(s.ln.Addr())
	} else {
		scheme := "http"
		if s.f.tlsCert != "" {
			scheme = "https"
		}
		fmt.Fprintf(s.env.Stdout, "hongbao serve: listening on %s://%s\n", scheme, s.ln.Addr())
	}
	var runErr error
	select {
	case <-ctx.Done():
		s.drain()
	case err := <-s.served:
		runErr = fmt.Errorf("serve: %w", err)
	}
	if err := s.shutdown(ctx); err != nil && runErr == nil {
		runErr = err
	}
	if s.sched != nil {
		st := s.sched.Worker().Stats()
		s.log.Info("stopped", "settled_grants", st.Grants, "refunds", st.Refunds, "conflicts", st.Conflicts)
	} else {
		s.log.Info("stopped")
	}
	return runErr
}

// drain is the first step of a shutdown on a signal: /readyz answers 503
// for --shutdown-delay while every other request is served as before, on
// the connections open and on new ones. A load balancer's probe sees the
// 503 and stops sending requests here (Kubernetes also removes a
// terminating pod from its Service's endpoints, but every node and
// gateway learns it a moment later); only then does the listener close.
// A second signal (IO.StopNow) cuts the delay short.
func (s *serveCmd) drain() {
	s.api.Stopping()
	if s.f.shutdownDelay <= 0 {
		s.log.Info("shutting down: no new connections; finishing in-flight requests")
		return
	}
	s.log.Info("shutting down: /readyz answers 503 while requests are still served; then no new connections, and in-flight requests finish (a second signal skips the wait)",
		"shutdown_delay", s.f.shutdownDelay)
	t := time.NewTimer(s.f.shutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
		s.log.Info("shutting down: no new connections; finishing in-flight requests")
	case <-s.env.StopNow:
		s.log.Info("shutting down at once (a second signal): no new connections; finishing in-flight requests")
	case err := <-s.served:
		s.log.Error("shutting down: the listener failed during the delay", "err", err)
	}
}

// shutdown stops taking requests and finishes the ones in flight (their
// grabs complete in Redis and are answered), shuts the engine down (the
// blocks it opens ahead of need write to the ledger in the background),
// then stops the scheduler after its current batch. close then closes the
// ledger, then Redis.
func (s *serveCmd) shutdown(ctx context.Context) error {
	s.api.Stopping()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.f.shutdownTimeout)
	defer cancel()
	var err error
	if serr := s.srv.Shutdown(sctx); serr != nil {
		s.log.Error("shutdown: in-flight requests did not finish in time", "err", serr)
		_ = s.srv.Close()
		err = errors.New("shutdown timed out with requests in flight")
	}
	if s.pprof != nil {
		_ = s.pprof.Close()
	}
	if s.metricsSrv != nil {
		_ = s.metricsSrv.Close()
	}
	if s.eng != nil {
		if eerr := s.eng.Shutdown(sctx); eerr != nil {
			s.log.Error("shutdown: the engine's work in flight did not finish in time", "err", eerr)
			err = cmp.Or(err, eerr)
		}
	}
	if s.sched != nil {
		s.sched.Stop()
	}
	return err
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
