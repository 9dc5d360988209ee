package httpapi

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
)

// Config configures a Server. Zero fields take their documented defaults.
type Config struct {
	// Engine answers grabs and manages red packet campaigns: a
	// *hongbao.Engine. Required.
	Engine Engine
	// Discounts answers the discount routes. Default: the Engine's
	// Discounts(), which a *hongbao.Engine has.
	Discounts Discounts
	// Settlement reads the campaigns' settlement backlogs and redrives
	// their dead grants: settle.NewBacklogs on the engine's Redis client.
	// Required.
	Settlement Settlement
	// Store answers readiness, the persistence metric and the shared
	// request count of GlobalRate. Default: the Engine, which is one when
	// it is a *hongbao.Engine.
	Store Store
	// UserSecrets verify users' tokens; the first also verifies tokens
	// without a kid. At least one, each at least MinSecretLen bytes.
	UserSecrets []Secret
	// AdminKeys are the operators' bearer keys, each at least MinSecretLen
	// bytes. At least one.
	AdminKeys [][]byte
	// PaymentKeys are the payment system's bearer keys, each at least
	// MinSecretLen bytes: they reserve, confirm and cancel discounts for
	// the user named in the body. An admin key does that too. Default
	// none: only the admin keys.
	PaymentKeys [][]byte
	// GatewayKeys are the bearer keys of platforms' gateways, each at
	// least MinSecretLen bytes: a gateway key vouches for the users its
	// platform already authenticated and grabs for them in batches
	// (POST /v1/campaigns/{id}/grabs). An admin key does that too.
	// Default none: only the admin keys.
	GatewayKeys [][]byte
	// MetricsKeys are bearer keys that may read /metrics on the API's
	// listener (a Prometheus scraper's), each at least MinSecretLen bytes;
	// an admin key may too. Nobody else: the metrics name every campaign
	// and its money. A private listener serving Server.Metrics needs no
	// key. Default none: only the admin keys.
	MetricsKeys [][]byte
	// Token is what a user token must say besides its signature: issuer,
	// audience, maximum lifetime. Default: iss and aud not checked, at
	// most 24h.
	Token TokenScope
	// Ready are the readiness checks of /readyz besides Redis (Store's
	// Health: it answers, takes writes, has the replicas the engine waits
	// for), by name: a failing one makes the server unready. Default:
	// none.
	Ready map[string]func(context.Context) error
	// Degraded are checks /readyz reads and reports by name, and does not
	// hold against the server: dependencies whose outage refuses some
	// requests while the others go on. The ledger is one: without it
	// creates, and grabs that need the next block of a pool, answer 503
	// unavailable, while grabs of opened blocks and the reads go on, so a
	// process that took itself out of its load balancer for it would
	// refuse all of them. Default: none.
	Degraded map[string]func(context.Context) error
	// Retired, if not nil, says whether the ledger knows campaign id: a
	// campaign whose Redis keys are gone (settled, retired and expired)
	// leaves its entries there. A create whose Idempotency-Key names such
	// a campaign is refused: creating it again would reuse a settled
	// campaign's id in the ledger. Default nil: not checked.
	Retired func(ctx context.Context, id string) (bool, error)
	// Fund, if not nil, writes the ledger's fund entry of a campaign just
	// created (idempotent). A failure is logged and the create still
	// succeeds: the settlement worker writes the same entry before the
	// campaign's first grant. Default nil: the worker funds.
	Fund func(ctx context.Context, c *hongbao.Campaign) error
	// SettledCents, if not nil, reads the cents of a campaign's grants
	// already in the ledger, for the backlog in cents
	// (hongbao_settlement_lag_cents and its per-campaign series): the
	// campaign's granted cents in Redis less these. Default: nil (the
	// cents metrics are absent).
	SettledCents func(ctx context.Context, id string) (int64, error)
	// MaxBodyBytes caps a request body. Default 16 KiB; a gateway's batch
	// of grabs (up to MaxGrabBatch user ids) may take 256 KiB whatever it
	// is.
	MaxBodyBytes int64
	// MaxCount caps the packets of one red packet campaign, and the
	// quota of one discount campaign, created over HTTP (serve's
	// --max-count). Default 1,000,000; a split refuses more than
	// split.MaxCount (10,000,000) whatever it is.
	MaxCount int
	// Leeway is the clock skew allowed on a token's exp and nbf, on an
	// iat in the future (refused beyond it) and on Token.MaxAge.
	// Default 30s.
	Leeway time.Duration
	// UserRate and UserBurst limit requests per user, per second, in this
	// process. Default 5 per second, burst 10; negative turns it off.
	UserRate  float64
	UserBurst int
	// IPRate and IPBurst limit requests per client address (the TCP peer,
	// or the forwarded client behind TrustedProxies), per second, in this
	// process. Default off (0): behind a platform's gateway that is not in
	// TrustedProxies every request comes from a few addresses.
	IPRate  float64
	IPBurst int
	// TrustedProxies are the networks of the proxies in front of the
	// service (a platform's gateway, a load balancer) whose
	// X-Forwarded-For is believed. A request whose TCP peer is in one of
	// them comes from the right-most address of its X-Forwarded-For that
	// is not itself in one: the address the outermost trusted proxy saw.
	// The failed-authentication limit, IPRate, the demo's token limit and
	// the logs count that client. From any other peer the header is
	// ignored: anyone can write it. Default none: the client is the TCP
	// peer.
	TrustedProxies []netip.Prefix
	// GlobalRate limits /v1 requests per second over every process sharing
	// the Redis; only requests that authenticated spend it. Default off
	// (0).
	GlobalRate int64
	// AuthFailRate and AuthFailBurst limit failed authentications per
	// client address (an IPv6 address's /64), per second, in this process:
	// a failure from an address past them is answered 429 instead of 401
	// or 403. Valid credentials are served whatever their address spent.
	// Default 5 per second, burst 50; negative turns it off.
	AuthFailRate  float64
	AuthFailBurst int
	// Timeout bounds each call to Redis or the ledger made for a request.
	// Default 5s.
	Timeout time.Duration
	// Fairness answers the commitment, proof and draw log routes
	// (fairness.go). Default: the Engine, when it is one (a
	// *hongbao.Engine is).
	Fairness Fairness
	// Receipts signs the receipts of grants and publishes its keys at
	// /.well-known/jwks.json. Default nil: the receipt routes answer
	// not_found and the key set is empty.
	Receipts *fairness.Signer
	// DrawLogRetention is how long after its close a campaign's draw log
	// is served (regulators ask for at least 90 days). Default
	// DefaultDrawLogRetention (400 days); negative serves it for ever.
	DrawLogRetention time.Duration
	// RetryAfter is what 503 busy answers ask clients to wait. Default 1s.
	RetryAfter time.Duration
	// Logger receives admin actions and failures. Default slog.Default().
	Logger *slog.Logger
	// Tracer, if not nil, records a server span of each API request
	// (OpenTelemetry), a child of the caller's traceparent when one came.
	// Default nil: no spans.
	Tracer trace.Tracer
	// Registry receives the metrics served at /metrics: the API's, the
	// engine's (metrics.NewEngine, observing Engine) and the campaigns'
	// (metrics.NewCampaigns), registered by New; a process that runs a
	// scheduler adds its own (metrics.NewScheduler). Default: a new
	// registry.
	Registry *prometheus.Registry
	// Now is the clock for tokens and rate limits. Default time.Now.
	Now func() time.Time

	// Demo, if not nil, turns on the demo mode of hongbao demo --web: GET
	// /v1/demo and POST /v1/demo/token, which hands a user token to anyone
	// who asks. Never on a real deployment. Default nil.
	Demo *Demo
	// PlayEmbedders are the origins ("https://app.example.com") allowed to
	// show the play page in a frame and to hand it the user's token with
	// postMessage. Default none: the page cannot be framed and takes the
	// token from its URL fragment (#token=...).
	PlayEmbedders []string
	// LiveInterval is how often a campaign open in a console is read from
	// Redis; every console watching it shares the reading. Default 1s.
	LiveInterval time.Duration
	// MaxLiveViews caps the console live views (event streams) open at
	// once in this process. Default 64.
	MaxLiveViews int
	// MaxLiveCampaigns caps the campaigns whose grab answers this process
	// counts for the console; the one unused the longest makes room.
	// Default 256, and at least MaxLiveViews.
	MaxLiveCampaigns int
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("httpapi: Config.Engine is required")
	case c.Discounts == nil && discountsOf(c.Engine) == nil:
		return errors.New("httpapi: Config.Discounts is required when the Engine has no Discounts()")
	case c.Settlement == nil:
		return errors.New("httpapi: Config.Settlement is required")
	case c.Store == nil && !isStore(c.Engine):
		return errors.New("httpapi: Config.Store is required when the Engine is not a Store")
	case len(c.UserSecrets) == 0:
		return errors.New("httpapi: at least one user token secret is required")
	case len(c.AdminKeys) == 0:
		return errors.New("httpapi: at least one admin key is required")
	case c.MaxBodyBytes < 0, c.MaxCount < 0, c.Leeway < 0, c.Token.MaxAge < 0, c.Timeout < 0, c.RetryAfter < 0, c.GlobalRate < 0,
		c.LiveInterval < 0, c.MaxLiveViews < 0, c.MaxLiveCampaigns < 0:
		return errors.New("httpapi: limits and durations must not be negative")
	case c.Demo != nil && (c.Demo.Campaign == nil || c.Demo.TokenTTL < 0):
		return errors.New("httpapi: Config.Demo needs a Campaign function and a TokenTTL that is not negative")
	}
	kids := map[string]bool{}
	for i, s := range c.UserSecrets {
		if len(s.Key) < MinSecretLen {
			return fmt.Errorf("httpapi: user token secret %d is %d bytes; at least %d needed", i+1, len(s.Key), MinSecretLen)
		}
		if kids[s.KID] {
			return fmt.Errorf("httpapi: two user token secrets have kid %q", s.KID)
		}
		if s.KID == "" && i > 0 {
			// Only the first secret checks tokens without a kid; this
			// one would check nothing.
			return fmt.Errorf("httpapi: user token secret %d has no kid; only the first may go without one", i+1)
		}
		kids[s.KID] = true
	}
	for _, class := range []struct {
		name string
		keys [][]byte
	}{{"admin", c.AdminKeys}, {"payment", c.PaymentKeys}, {"gateway", c.GatewayKeys}, {"metrics", c.MetricsKeys}} {
		for i, k := range class.keys {
			if len(k) < MinSecretLen {
				return fmt.Errorf("httpapi: %s key %d is %d bytes; at least %d needed", class.name, i+1, len(k), MinSecretLen)
			}
			if len(k) > maxCredentialLen {
				return fmt.Errorf("httpapi: %s key %d is %d bytes; at most %d are read", class.name, i+1, len(k), maxCredentialLen)
			}
		}
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("httpapi: trusted proxy network %v is not valid", p)
		}
	}
	return nil
}

// Server is the HTTP service. It is an http.Handler.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	users    *userAuth
	admins   *keyAuth
	payments *keyAuth // the payment keys and the admin keys
	gateways *keyAuth // the gateway keys and the admin keys
	scrapers *keyAuth // the metrics keys and the admin keys
	promh    http.Handler
	log      *slog.Logger
	metrics  *apiMetrics
	userLim  *bucketLimiter
	ipLim    *bucketLimiter
	failLim  *bucketLimiter // failed authentications per address
	failLog  logSampler
	// ledgerLog samples the log of requests refused because the ledger
	// is unreachable.
	ledgerLog logSampler
	// replicasLog samples the log of writes too few replicas
	// acknowledged.
	replicasLog logSampler
	demoLim     *bucketLimiter // demo tokens per address
	global      *globalLimiter
	routes      []string
	stopping    atomic.Bool
	stopped     chan struct{} // closed by Stopping: the gateways' streams end
	live        *liveHub
	lists       singleflight.Group // list requests for the same page share a reading
	ready       readyCache

	counters  sync.Map // routeCode -> prometheus.Counter
	latencies sync.Map // route -> prometheus.Observer
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	setDefaults(&cfg)
	setLiveDefaults(&cfg)
	if cfg.Store == nil {
		cfg.Store = cfg.Engine.(Store)
	}
	if cfg.Demo != nil && cfg.Demo.TokenTTL > cfg.Token.MaxAge {
		return nil, fmt.Errorf("httpapi: Config.Demo.TokenTTL %v is longer than Token.MaxAge %v", cfg.Demo.TokenTTL, cfg.Token.MaxAge)
	}
	s := &Server{
		cfg:     cfg,
		mux:     http.NewServeMux(),
		users:   newUserAuth(cfg.UserSecrets, cfg.Token, cfg.Leeway, cfg.Now),
		log:     cfg.Logger.With("component", "http"),
		userLim: newBucketLimiter(cfg.UserRate, cfg.UserBurst),
		ipLim:   newBucketLimiter(cfg.IPRate, cfg.IPBurst),
		failLim: newBucketLimiter(cfg.AuthFailRate, cfg.AuthFailBurst),
		global:  newGlobalLimiter(cfg.Store.CountRequests, cfg.GlobalRate),
		stopped: make(chan struct{}),
	}
	if cfg.Demo != nil {
		s.demoLim = newBucketLimiter(cfg.Demo.TokenRate, cfg.Demo.TokenBurst)
	}
	s.setKeys()
	s.metrics = newMetrics(cfg.Registry, cfg, s)
	s.live = newLiveHub(cfg.MaxLiveCampaigns, cfg.MaxLiveViews, cfg.LiveInterval, cfg.Timeout, s.readLive, s.log, cfg.Now)

	s.handle("POST /v1/campaigns", s.v1(s.admin(s.createCampaign)))
	s.handle("GET /v1/campaigns/{id}", s.v1(s.admin(s.getCampaign)))
	s.handle("POST /v1/campaigns/{id}/close", s.v1(s.admin(s.closeCampaign)))
	s.handle("POST /v1/campaigns/{id}/grab", s.v1(s.user(s.grab)))
	s.handle(grabsRoute, s.v1(s.gateway(s.grabBatch)))
	s.handle("GET /v1/campaigns/{id}/grants/me", s.v1(s.user(s.myGrant)))
	s.discountRoutes()
	s.pauseRoutes()
	s.fairRoutes()
	s.handle("GET /healthz", s.healthz)
	s.handle("GET /readyz", s.readyz)
	// A scrape reads Redis (cached for a second, shared by concurrent
	// scrapes): a few at a time, each bounded.
	s.promh = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		MaxRequestsInFlight: 4, Timeout: 2 * cfg.Timeout,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})
	s.handle("GET /metrics", s.privateMetrics)
	s.handle("GET /openapi.json", serveOpenAPI)
	s.rpcRoutes()
	if err := s.mountWeb(); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	// Everything else answers 404 in the error shape.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.count("unmatched", http.StatusNotFound, time.Now())
		s.refuse(w, errNoRoute, 0)
	})
	return s, nil
}

// isStore says whether e is also a Store (a *hongbao.Engine is).
func isStore(e Engine) bool {
	_, ok := e.(Store)
	return ok
}

// setDefaults fills the documented defaults into cfg.
func setDefaults(cfg *Config) {
	if cfg.Discounts == nil {
		cfg.Discounts = discountsOf(cfg.Engine)
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 16<<10)
	cfg.MaxCount = cmp.Or(cfg.MaxCount, 1_000_000)
	cfg.Leeway = cmp.Or(cfg.Leeway, 30*time.Second)
	cfg.Token.MaxAge = cmp.Or(cfg.Token.MaxAge, 24*time.Hour)
	cfg.UserRate = cmp.Or(cfg.UserRate, 5)
	cfg.UserBurst = cmp.Or(cfg.UserBurst, 10)
	cfg.AuthFailRate = cmp.Or(cfg.AuthFailRate, 5)
	cfg.AuthFailBurst = cmp.Or(cfg.AuthFailBurst, 50)
	cfg.IPBurst = cmp.Or(cfg.IPBurst, max(int(cfg.IPRate), 1))
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	cfg.DrawLogRetention = cmp.Or(cfg.DrawLogRetention, DefaultDrawLogRetention)
	if f, ok := cfg.Engine.(Fairness); ok && cfg.Fairness == nil {
		cfg.Fairness = f
	}
	cfg.RetryAfter = cmp.Or(cfg.RetryAfter, time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
}

// setKeys sets up the key classes. The admin keys open every class.
func (s *Server) setKeys() {
	salt := fingerprintSalt(s.cfg.UserSecrets)
	s.admins = newKeyAuth(salt, "admin", s.cfg.AdminKeys)
	s.payments = newKeyAuth(salt, "payment", s.cfg.PaymentKeys)
	s.payments.add(salt, "admin", s.cfg.AdminKeys)
	s.gateways = newKeyAuth(salt, "gateway", s.cfg.GatewayKeys)
	s.gateways.add(salt, "admin", s.cfg.AdminKeys)
	s.scrapers = newKeyAuth(salt, "metrics", s.cfg.MetricsKeys)
	s.scrapers.add(salt, "admin", s.cfg.AdminKeys)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Routes lists the route patterns, sorted ("POST /v1/campaigns", ...).
func (s *Server) Routes() []string {
	out := append([]string(nil), s.routes...)
	sort.Strings(out)
	return out
}

// Stopping makes /readyz answer 503 so load balancers stop sending
// requests while the server drains, and ends the consoles' live views
// (long-lived requests that a drain would otherwise wait for). It cannot
// be undone.
func (s *Server) Stopping() {
	if s.stopping.CompareAndSwap(false, true) {
		close(s.stopped)
	}
	s.live.stop()
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = cmp.Or(w.code, code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.code = cmp.Or(w.code, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handle registers an API route (listed by Routes, so in openapi.json)
// with serve.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	s.serve(pattern, h)
}

// serve registers a route with its request metrics and a recover that
// answers 500 in the error shape.
func (s *Server) serve(pattern string, h http.HandlerFunc) {
	if s.cfg.Tracer != nil {
		h = s.traced(pattern, h)
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "route", pattern, "panic", fmt.Sprint(p))
				if sw.code == 0 {
					s.refuse(sw, errInternal, 0)
				}
			}
			s.count(pattern, sw.code, start)
		}()
		h(sw, r)
	})
}

// traced wraps a route's handler in a server span, continuing the trace
// of the request's traceparent. w is serve's statusWriter.
func (s *Server) traced(pattern string, h http.HandlerFunc) http.HandlerFunc {
	method, route, _ := strings.Cut(pattern, " ")
	attrs := trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route))
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.cfg.Tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer), attrs)
		defer span.End()
		h(w, r.WithContext(ctx))
		code := http.StatusOK
		if sw, ok := w.(*statusWriter); ok && sw.code != 0 {
			code = sw.code
		}
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	}
}

type routeCode struct {
	route string
	code  int
}

// count records a request. The labelled series are looked up once and
// kept: the label hashing would otherwise run on every request.
func (s *Server) count(route string, code int, start time.Time) {
	code = cmp.Or(code, http.StatusOK)
	key := routeCode{route, code}
	c, ok := s.counters.Load(key)
	if !ok {
		c, _ = s.counters.LoadOrStore(key, s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)))
	}
	c.(prometheus.Counter).Inc()
	o, ok := s.latencies.Load(route)
	if !ok {
		o, _ = s.latencies.LoadOrStore(route, s.metrics.reqLatency.WithLabelValues(route))
	}
	o.(prometheus.Observer).Observe(time.Since(start).Seconds())
}

// The gates of the JSON routes (gates.go), each refusal answered in the
// error shape.

// v1 applies the per-address request limit to an API route.
func (s *Server) v1(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if no := s.ipGate(inboundOf(r)); no.refused() {
			s.refuse(w, no.answer, no.wait)
			return
		}
		next(w, r)
	}
}

// authedHandler is a route's handler once its caller is known: the user,
// the operator or the payment system, by name.
type authedHandler func(w http.ResponseWriter, r *http.Request, who string)

// authed runs next for the caller gate lets through, within the request
// budget.
func (s *Server) authed(gate func(inbound) (string, refusal), next authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := inboundOf(r)
		who, no := gate(in)
		if !no.refused() {
			no = s.spendGate(in)
		}
		if no.refused() {
			s.refuse(w, no.answer, no.wait)
			return
		}
		next(w, r, who)
	}
}

// user authenticates a user and applies the per-user limit.
func (s *Server) user(next authedHandler) http.HandlerFunc { return s.authed(s.userGate, next) }

// admin authenticates an operator.
func (s *Server) admin(next authedHandler) http.HandlerFunc { return s.authed(s.adminGate, next) }

// payment authenticates the payment system (a payment key or an admin
// key); a user's own token answers 403.
func (s *Server) payment(next authedHandler) http.HandlerFunc { return s.authed(s.paymentGate, next) }

// anyone is the global budget for the routes that take no credentials
// (the demo mode's).
func (s *Server) anyone(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if no := s.spendGate(inboundOf(r)); no.refused() {
			s.refuse(w, no.answer, no.wait)
			return
		}
		next(w, r)
	}
}

// campaignID reads and validates the {id} of the path.
func campaignID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := checkCampaignID(id); err != nil {
		return "", err
	}
	return id, nil
}

// checkCampaignID refuses a campaign id the engine would refuse, whatever
// the protocol that named it.
func checkCampaignID(id string) error {
	if err := hongbao.ValidateCampaignID(id); err != nil {
		return &requestError{code: CodeInvalidID, msg: "campaign ids are 1 to 64 of A-Z a-z 0-9 _ -"}
	}
	return nil
}

// idempotentID turns an Idempotency-Key into a campaign id, so a retried
// create names the same campaign and the engine's own "exists" check makes
// it idempotent, across processes, with nothing else stored.
func idempotentID(key string) (string, error) {
	if len(key) > 200 {
		return "", badRequest(CodeInvalidRequest, "Idempotency-Key is longer than 200 bytes")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "", badRequest(CodeInvalidRequest, "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	sum := sha256.Sum256([]byte(key))
	return "k" + hex.EncodeToString(sum[:16]), nil
}

func (s *Server) createCampaign(w http.ResponseWriter, r *http.Request, admin string) {
	create(s, &createKind[hongbao.Spec, *hongbao.Campaign]{
		name: "campaign", action: "create",
		decode:   decodeCreate,
		id:       func(spec *hongbao.Spec) *string { return &spec.ID },
		ledgerID: func(id string) string { return id },
		create:   s.createPackets,
		status: func(ctx context.Context, id string) (*hongbao.Campaign, error) {
			st, err := s.cfg.Engine.Status(ctx, id)
			if err != nil {
				return nil, err
			}
			return &st.Campaign, nil
		},
		same: func(c *hongbao.Campaign, spec hongbao.Spec) bool { return spec.Describes(c) },
		created: func(ctx context.Context, r *http.Request, admin string, spec hongbao.Spec, c *hongbao.Campaign) {
			if s.cfg.Fund != nil {
				if err := s.cfg.Fund(ctx, c); err != nil {
					s.log.Warn("fund entry not written at create; settlement will write it", "campaign", c.ID, "err", err)
				}
			}
			s.log.Info("admin action", "who", admin, "action", "create", "campaign", c.ID,
				"total_cents", c.Total, "count", c.Count, "split", c.Split, "funding", c.Funding,
				"opens_at", c.OpensAt, "closes_at", c.ClosesAt, "idempotency_key", spec.ID != "", "remote", s.remote(r))
		},
		json: func(c *hongbao.Campaign) any { return campaignJSON(c) },
	}, w, r, admin)
}

// createPackets creates a red-packet campaign. A retired id is answered
// with the engine's own text: the ledger knows this id (settled, or Redis
// lost it and it needs a rebuild), and the engine tells the two apart
// only in its text, written for the operator who sent the create, so that
// text is the answer here, not errorTable's.
func (s *Server) createPackets(ctx context.Context, spec hongbao.Spec) (*hongbao.Campaign, error) {
	c, err := s.cfg.Engine.Create(ctx, spec)
	if errors.Is(err, hongbao.ErrCampaignRetired) {
		return nil, &requestError{code: CodeIdempotencyMismatch, msg: err.Error()}
	}
	return c, err
}

// sameWindow says whether a campaign opens and closes when a create asked
// (to the millisecond, as stored); a time the create left out was "now"
// at the first create and matches any.
func sameWindow(opens, closes, gotOpens, gotCloses time.Time) bool {
	return (opens.IsZero() || opens.UnixMilli() == gotOpens.UnixMilli()) &&
		(closes.IsZero() || closes.UnixMilli() == gotCloses.UnixMilli())
}

func (s *Server) getCampaign(w http.ResponseWriter, r *http.Request, _ string) {
	s.onCampaign(w, r, s.idTarget, func(ctx context.Context, id string) (any, error) {
		st, err := s.cfg.Engine.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		return s.withBacklog(ctx, id, st)
	})
}

// withBacklog is a red-packet campaign's status as the API answers it:
// with the campaign's settlement backlog.
func (s *Server) withBacklog(ctx context.Context, id string, st *hongbao.Status) (any, error) {
	b, err := s.cfg.Settlement.ReadBacklog(ctx, id)
	if err != nil {
		return nil, err
	}
	return statusJSON(st, b), nil
}

// onCampaign answers a route on one campaign of either kind: target reads
// the id (and has answered if it could not), call runs under the
// request's timeout, and what it returns is the answer (200), or its
// error is.
func (s *Server) onCampaign(w http.ResponseWriter, r *http.Request, target func(http.ResponseWriter, *http.Request) (string, bool),
	call func(ctx context.Context, id string) (any, error)) {
	id, ok := target(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	out, err := call(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// idTarget reads the campaign id of a route that reads no body; on
// failure it has answered.
func (s *Server) idTarget(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := campaignID(r)
	if err != nil {
		s.fail(w, r, err)
		return "", false
	}
	return id, true
}

// actionTarget reads the campaign id of an action that takes no body
// (close, grab) and checks that no body came; on failure it has answered.
func (s *Server) actionTarget(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, _, ok := bodyTarget(s, w, r, func(body []byte) (struct{}, error) { return struct{}{}, decodeEmpty(body) })
	return id, ok
}

// bodyTarget reads the campaign id of a route and its body, which decode
// reads; on failure it has answered.
func bodyTarget[T any](s *Server, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error)) (id string, v T, ok bool) {
	id, err := campaignID(r)
	if err == nil {
		var body []byte
		if body, err = readBody(w, r, s.cfg.MaxBodyBytes); err == nil {
			v, err = decode(body)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return "", v, false
	}
	return id, v, true
}

func (s *Server) closeCampaign(w http.ResponseWriter, r *http.Request, admin string) {
	s.onCampaign(w, r, s.actionTarget, func(ctx context.Context, id string) (any, error) {
		st, err := s.cfg.Engine.CloseCampaign(ctx, id)
		if err != nil {
			return nil, err
		}
		s.log.Info("admin action", "who", admin, "action", "close", "campaign", id,
			"state", st.State, "close_reason", st.CloseReason, "remote", s.remote(r))
		return s.withBacklog(ctx, id, st)
	})
}

// grantBufs recycle the buffers grab answers are encoded into.
var grantBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func (s *Server) grab(w http.ResponseWriter, r *http.Request, user string) {
	id, ok := s.actionTarget(w, r)
	if !ok {
		return
	}
	g, err := s.grabOp(r.Context(), id, user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bp := grantBufs.Get().(*[]byte)
	*bp = appendGrant((*bp)[:0], g, g.Outcome.String())
	if wantsReceipt(r) {
		*bp = s.appendReceipt(r.Context(), *bp, g)
	}
	writeBody(w, http.StatusOK, *bp)
	grantBufs.Put(bp)
}

func (s *Server) myGrant(w http.ResponseWriter, r *http.Request, user string) {
	id, ok := s.idTarget(w, r)
	if !ok {
		return
	}
	g, err := s.heldOp(r.Context(), id, user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, grantJSON(g, ""))
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Metrics serves /metrics without credentials, for a listener of its own
// that only the monitoring network reaches (serve --metrics-listen).
func (s *Server) Metrics() http.Handler { return s.promh }

// privateMetrics serves /metrics on the API's listener to a metrics key
// or an admin key only: the metrics name every campaign and its money.
func (s *Server) privateMetrics(w http.ResponseWriter, r *http.Request) {
	if _, err := s.scrapers.match(r.Header); err != nil {
		no := s.authFailed(inboundOf(r), "metrics", err, errNeedMetricsKey)
		s.refuse(w, no.answer, no.wait)
		return
	}
	s.promh.ServeHTTP(w, r)
}
