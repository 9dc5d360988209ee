package hongbao

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/split"
)

// Config configures an Engine. Zero fields take their documented defaults.
type Config struct {
	// Redis is the client to run the scripts on. Required. Use a client
	// made with DisableCache when the server does not support client-side
	// caching (an emulator); hongbao reads no cached data. A Sentinel
	// deployment is a client made from rueidis.ParseURL(
	// "redis://S1:26379?master_set=NAME&addr=S2:26379&addr=S3:26379"): it
	// follows the master through failovers (see docs/durability.md).
	Redis rueidis.Client
	// Namespace prefixes every key the engine writes, its campaigns'
	// registries and counters: deployments sharing one Redis (or one
	// Redis Cluster) in different namespaces never see each other's
	// campaigns. Every process of one deployment (engines, schedulers,
	// rebuild, reconcile) uses the same one; the settlement scheduler's
	// is settle.Config.Namespace. 1 to 64 letters, digits, '_', '-' or
	// '.'. Default "hb", the keys of every deployment before namespaces
	// existed (docs/operations.md, "Sharing a Redis").
	Namespace string
	// DefaultWindow is how long a campaign stays open when its spec gives
	// no close time. Default: DefaultWindow (24h).
	DefaultWindow time.Duration
	// MaxBatch is the most grabs of one campaign sent in one script call.
	// Default 512; at most 3000 (Lua's argument limits).
	MaxBatch int
	// MaxQueue is the most grabs of one campaign waiting for a batch; a
	// grab beyond it fails at once with ErrBusy rather than queueing
	// without bound. Default 20000.
	MaxQueue int
	// BatchTimeout bounds one batch call to Redis. It is the batch's own
	// deadline, never a caller's: a caller whose context ends stops
	// waiting, and the batch carries on for the others. Default
	// DefaultBatchTimeout (5s).
	BatchTimeout time.Duration
	// LegacyScripts sends the scripts without their "#!lua" flags line, for
	// servers that cannot parse it: Redis before 7.0 and the in-process
	// emulator. Default false. Without the flags a Redis out of memory may
	// fail a script at its first write rather than refuse it up front.
	LegacyScripts bool
	// LoadProgress, if not nil, is told how many packets are loaded while
	// Create loads a pool (for progress bars). Default: nil.
	LoadProgress func(loaded, count int)
	// WaitReplicas, when above 0, makes a grant durable before anyone is
	// told: after each batch script (and each step of a transfer between
	// shards) the engine sends WAIT WaitReplicas WaitTimeout on the same
	// connection, one per batch, and answers the batch only once that
	// many replicas hold its writes. A WAIT that falls short answers
	// ErrOutcomeUnknown to the whole batch: the grants are on the primary
	// and may be lost in a failover, so nobody is told GRANTED; a retry
	// answers ALREADY with the same packet when the grant survived, and
	// grants afresh when it was lost. An answer given from earlier writes
	// waits for them too: a batch that wrote nothing (every user ALREADY)
	// writes the shard's sync key and waits again on its connection, and
	// Held reads, writes it and waits in one round trip, so no packet is
	// reported that the replicas may lack. Discount calls (reserve,
	// confirm, cancel) wait in the same way. Default 0 (no waiting). See
	// docs/durability.md.
	WaitReplicas int
	// WaitTimeout bounds each WAIT. Default DefaultWaitTimeout (500ms);
	// with WaitReplicas above 0 it must be shorter than BatchTimeout, the
	// default one (5s) when BatchTimeout is not set. A batch that answered
	// from earlier writes only sends two (see WaitReplicas).
	WaitTimeout time.Duration
	// Packets, if not nil, records every packet of a campaign (seq i+1 is
	// cents[i]) before the campaign goes live, so that a campaign Redis
	// lost can be rebuilt from it (hongbao rebuild). A ledger.Ledger is
	// one. Create fails, and the campaign stays loading, when it fails; a
	// retried Create records the same packets again, which it must accept.
	// When it is a TermsRecorder too (a ledger.Ledger is), Create also
	// records the campaign's terms, its window resolved by the Redis
	// clock, before the campaign goes live, and Close records an
	// operator's close: a rebuild of a campaign Redis lost entirely then
	// restores its own window and state. When it reads totals too (a
	// ledger.Ledger does), Discounts().Create refuses an id the ledger knows
	// as funded while Redis no longer holds it, and Create one the ledger
	// shows refunded (settled) while Redis no longer holds it
	// (ErrCampaignRetired).
	// Default nil: New then warns through Logger, unless WithoutLedger.
	Packets PacketRecorder
	// WithoutLedger says that Packets is nil on purpose, and New does not
	// warn about it. Without Packets a campaign Redis lost cannot be
	// rebuilt (hongbao rebuild restores it from the packets the ledger
	// holds), pools have no pop frontier (BlockSize), and nothing stops a
	// Create from reusing the id of a campaign settled and gone from
	// Redis, whose packets, fund and grants it would then share in the
	// ledger (ErrCampaignRetired). For tests, benchmarks and demos; set
	// with Packets it is refused. Default false.
	WithoutLedger bool
	// BlockSize is the size of the blocks the durable pop frontier opens
	// a pool in, when Config.Packets is a ledger.BlockRecorder (a
	// ledger.Ledger is): a campaign's pools start sealed, and the engine
	// records each block in the ledger before any of its packets can be
	// popped, so after Redis lost the campaign a rebuild quarantines at
	// most about one block per shard. With another recorder, or none,
	// there is no frontier: every packet is poppable from the start.
	// Default DefaultBlockSize (10,000); at most MaxBlockSize (100,000).
	BlockSize int
	// Tracer, if not nil, records spans (OpenTelemetry): each request's
	// wait in the coalescer (hongbao.coalesce.wait), each batch script call
	// with its size (hongbao.batch, a child of its first request's wait
	// and linked to the others'), and each WAIT for replicas (redis.wait).
	// Default nil: no spans, and nothing spent on them.
	Tracer trace.Tracer
	// Owner is the identity of the ledger or sink this deployment's
	// campaigns settle into, recorded in each campaign (its root's meta)
	// at create: a settlement scheduler settles, refunds and reaps only
	// the campaigns whose owner is its own (settle.Config), so two
	// deployments that share a namespace by mistake never settle each
	// other's money; an operator changes it with SetOwner. Default: the
	// Identity of Config.Packets when it has one (a ledger.Ledger does:
	// an id created in the ledger when it was first migrated). With
	// neither, campaigns record no owner, and the first scheduler that
	// settles one claims it. 1 to 256 printable ASCII bytes, no space
	// (ValidateOwner); a webhook.Sink's Identity is one.
	Owner string
	// LoadHold is how long a create holds the campaign it is loading
	// without renewing the hold; the create renews it every third of
	// LoadHold while it works. Another create of the same id meanwhile
	// waits for the campaign to go live; once a hold lapsed (its create
	// died or stalled), the next create takes the load over and starts it
	// again (see Create). Longer: a create that stalls (a paused process,
	// a slow ledger) keeps its campaign longer; shorter: a create that died
	// is taken over sooner. Default DefaultLoadHold (5s); 100ms to 10m.
	LoadHold time.Duration
	// Logger receives what the engine says outside a call's error: a
	// configuration it warns about, background work that failed.
	// Default: slog.Default().
	Logger *slog.Logger
	// Observers hear every grab, discount call and batch script call,
	// with its answer and latency (see Observer): metrics, for one
	// (package metrics). Engine.Observe adds more later. Default none:
	// nothing is spent on them.
	Observers []Observer
}

// Defaults of Config's fields.
const (
	// DefaultBatchTimeout is Config.BatchTimeout's default.
	DefaultBatchTimeout = 5 * time.Second
	// DefaultWaitTimeout is Config.WaitTimeout's default.
	DefaultWaitTimeout = 500 * time.Millisecond
	// MaxBlockSize is the largest Config.BlockSize.
	MaxBlockSize = 100000
)

// PacketRecorder records a campaign's packets; see Config.Packets.
type PacketRecorder interface {
	WritePackets(ctx context.Context, campaign string, cents []int64) error
}

// TermsRecorder keeps a campaign's terms next to its packets; see
// Config.Packets. ledger.Ledger is one.
type TermsRecorder interface {
	WriteTerms(ctx context.Context, campaign string, t ledger.Terms) error
	Terms(ctx context.Context, campaign string) (ledger.Terms, error)
}

// Validate checks the configuration, with its defaults applied where
// one field is checked against another. A refusal is a *ConfigError
// naming the field (errors.Is(err, ErrInvalidConfig)).
func (c Config) Validate() error {
	if c.Redis == nil {
		return &ConfigError{Field: "Config.Redis", Reason: "is required"}
	}
	if _, err := redisstore.ParseNamespace(c.Namespace); err != nil {
		return &ConfigError{Field: "Config.Namespace", Reason: err.Error(), Err: err}
	}
	if c.Owner != "" {
		if err := ValidateOwner(c.Owner); err != nil {
			return &ConfigError{Field: "Config.Owner", Reason: bareMessage(err), Err: err}
		}
	}
	if c.WithoutLedger && c.Packets != nil {
		return &ConfigError{Field: "Config.WithoutLedger", Value: "true", Reason: "says there is no ledger, but Config.Packets is set"}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"DefaultWindow", c.DefaultWindow}, {"BatchTimeout", c.BatchTimeout}, {"WaitTimeout", c.WaitTimeout}} {
		if f.v < 0 {
			return &ConfigError{Field: "Config." + f.name, Value: f.v.String(), Reason: "must not be negative"}
		}
	}
	for _, f := range []struct {
		name    string
		v, most int
	}{{"MaxBatch", c.MaxBatch, redisstore.MaxBatch}, {"MaxQueue", c.MaxQueue, math.MaxInt}, {"BlockSize", c.BlockSize, MaxBlockSize}, {"WaitReplicas", c.WaitReplicas, math.MaxInt}} {
		if f.v < 0 || f.v > f.most {
			reason := "must not be negative"
			if f.most != math.MaxInt {
				reason = fmt.Sprintf("must be within 0..%d", f.most)
			}
			return &ConfigError{Field: "Config." + f.name, Value: strconv.Itoa(f.v), Reason: reason}
		}
	}
	if c.LoadHold != 0 && (c.LoadHold < 100*time.Millisecond || c.LoadHold > 10*time.Minute) {
		return &ConfigError{Field: "Config.LoadHold", Value: c.LoadHold.String(), Reason: "must be within 100ms..10m"}
	}
	// Each WAIT runs inside its batch's call, so it must end before the
	// batch's deadline does, whether either was set or left to default.
	if wait, batch := cmp.Or(c.WaitTimeout, DefaultWaitTimeout), cmp.Or(c.BatchTimeout, DefaultBatchTimeout); c.WaitReplicas > 0 && wait >= batch {
		return &ConfigError{Field: "Config.WaitTimeout", Value: wait.String(),
			Reason: fmt.Sprintf("must be shorter than Config.BatchTimeout (%s)", batch)}
	}
	return nil
}

// Engine creates campaigns and answers grabs. It is safe for concurrent use.
type Engine struct {
	cfg       Config
	store     *redisstore.Store
	co        *coalescer
	terms     TermsRecorder          // Config.Packets, when it keeps terms; else nil
	discounts *discounter            // discount campaigns (discount_batch.go)
	hooks     settleHooks            // a settlement scheduler's (engine_settle.go)
	obs       *observers             // Config.Observers and Observe's (observe.go)
	ownerID   atomic.Pointer[string] // the identity of Config.Packets, once read (owner.go)
	life      *life                  // the work Shutdown waits for (shutdown.go)
	fair      *trees                 // the trees of campaigns' proofs (fair.go)
	pauseStep func(written int)      // tests only: runs after each shard a pause or resume writes (pause.go)
	log       *slog.Logger
}

// Stats reports the engine's batching counters and its WAITs that fell
// short.
func (e *Engine) Stats() Stats {
	s := e.co.stats()
	w := e.store.WaitShortfalls()
	s.WaitReplicas, s.WaitLastAcked = e.cfg.WaitReplicas, w.LastAcked
	s.WaitShort = make(map[string]uint64, len(w.Short))
	for _, op := range redisstore.WaitOps() {
		s.WaitShort[op.String()] = w.Short[op]
	}
	return s
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DefaultWindow == 0 {
		cfg.DefaultWindow = DefaultWindow
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 512
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = 20000
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = DefaultBatchTimeout
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.LoadHold == 0 {
		cfg.LoadHold = DefaultLoadHold
	}
	store := redisstore.New(cfg.Redis)
	if cfg.LegacyScripts {
		store = redisstore.NewLegacy(cfg.Redis)
	}
	if cfg.WaitReplicas > 0 {
		if cfg.WaitTimeout == 0 {
			cfg.WaitTimeout = DefaultWaitTimeout
		}
		store = store.WithWait(cfg.WaitReplicas, cfg.WaitTimeout)
	}
	if cfg.Tracer != nil {
		store = store.WithTracer(cfg.Tracer)
	}
	ns, _ := redisstore.ParseNamespace(cfg.Namespace) // checked by Validate
	store = store.WithNamespace(ns)
	lf := newLife()
	var terms TermsRecorder
	if t, ok := cfg.Packets.(TermsRecorder); ok {
		terms = closedTerms{TermsRecorder: t, life: lf}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Packets == nil && !cfg.WithoutLedger {
		cfg.Logger.Warn("hongbao: Config.Packets is nil: campaigns this engine creates cannot be rebuilt if Redis loses them, their pools have no pop frontier, and a settled campaign's id can be created again; pass a ledger (ledger/open), or set Config.WithoutLedger to say it is on purpose",
			"namespace", ns.Name())
	}
	obs := newObservers(cfg.Observers)
	return &Engine{cfg: cfg, store: store, terms: terms, co: newCoalescer(store, cfg, lf, obs), discounts: newDiscounter(store, cfg, lf, obs), obs: obs,
		life: lf, fair: newTrees(), log: cfg.Logger.With("component", "engine", "namespace", ns.Name())}, nil
}

// Create validates spec, splits the total into packets, loads them into
// Redis and makes the campaign live, in that order: a grab never sees a
// half-loaded pool. Creates of the same id may run at once, in one
// process or in many (replicas of a service): exactly one creates the
// campaign, and every other waits until it is live and returns
// ErrCampaignExists (an *ExistsError with its state), or
// ErrCreateInProgress should ctx end first (create.go). A create that
// crashed or was interrupted can be run again with the same id: it takes
// the load over once the first one's hold lapsed (Config.LoadHold) and
// starts it over. A campaign that exists past loading is never touched:
// that is ErrCampaignExists. A refused spec is a *SpecError (see
// Spec.Validate), a refused id an *IDError. When Config.Packets is a
// ledger, an id the ledger shows settled (refunded), or live (grants,
// opened blocks), while Redis no longer holds it is ErrCampaignRetired,
// and nothing is written: a second campaign under it would share the
// first one's packets, fund, grants and refund in the ledger, and grant
// again packets granted before (a campaign Redis lost is rebuilt, not
// created).
//
// The campaign is registered for settlement before it goes live, and
// again by every create that finds it live (register.go): whatever step
// failed, a campaign that can be grabbed is one the scheduler settles.
func (e *Engine) Create(ctx context.Context, spec Spec) (*Campaign, error) {
	for {
		c, err := e.createOnce(ctx, spec)
		var held *heldError
		if !errors.As(err, &held) {
			return c, err
		}
		// Another create holds the load: wait until the campaign is live,
		// or begin again (from the recorded seed) once its hold lapsed.
		spec.ID = held.id
		if err := e.awaitLoad(ctx, "create", held.id, e.store.NS().CampaignKeys(held.id)); err != nil {
			return nil, e.registerExisting(ctx, "create", kindRedPacket, err)
		}
	}
}

// createOnce is one attempt of Create: a *heldError when another create
// holds the load.
func (e *Engine) createOnce(ctx context.Context, spec Spec) (*Campaign, error) {
	spec, err := e.recordedSeed(ctx, spec)
	if err != nil {
		return nil, err
	}
	c, amounts, err := e.prepare(spec)
	if err != nil {
		return nil, err
	}
	if c.Owner, err = e.Owner(ctx); err != nil {
		return nil, opErr("create", c.ID, err)
	}
	settled, err := e.settledInLedger(ctx, spec.ID)
	if err != nil {
		return nil, err
	}
	var act redisstore.Activation
	if c.Shards == 1 {
		act, err = e.createOne(ctx, c, spec, amounts, settled)
	} else {
		act, err = e.createSharded(ctx, c, spec, amounts, settled)
	}
	if err != nil {
		return nil, e.registerExisting(ctx, "create", kindRedPacket, err)
	}
	c.State = State(act.State)
	c.OpensAt, c.ClosesAt = time.UnixMilli(act.OpensAt), time.UnixMilli(act.ClosesAt)
	// Registered before activation (register.go); now with the close
	// time activation resolved.
	if err := e.register(ctx, "create", c.ID, kindRedPacket, act.ClosesAt); err != nil {
		return nil, err
	}
	return c, nil
}

// createOne loads and activates a one-shard campaign: begin, load,
// activate, each on the campaign's own keys. settled: the ledger shows the
// campaign refunded, so a begin that finds nothing past loading is refused
// (ErrCampaignRetired, settledInLedger). Stopped after the begin, the
// campaign stays loading under this create's hold until it lapses, and the
// next create of the id starts it over (create.go).
func (e *Engine) createOne(ctx context.Context, c *Campaign, spec Spec, amounts []int64, settled bool) (act redisstore.Activation, err error) {
	k := e.store.NS().CampaignKeys(c.ID)
	l := redisstore.Loader{Token: newToken(), Hold: e.cfg.LoadHold}
	b, err := e.store.Begin(ctx, k, l, redisstore.Meta{Terms: metaTerms(c), Frontier: e.frontier(c.Count)})
	if err := begun("create", c.ID, b, err); err != nil {
		return redisstore.Activation{}, err
	}
	h := e.keep(ctx, k, l.Token)
	defer func() {
		if lost := h.stop(); err != nil && !lost && !isHeld(err) {
			e.giveUp(h, k, l.Token)
		}
	}()
	if settled {
		// Its keys expired after the check, or a refused create left
		// this load: never live again.
		return redisstore.Activation{}, opErr("create", c.ID, ErrCampaignRetired)
	}
	// Stopped from here to the activation, the campaign is loading (no
	// grab sees it) under this create's hold: the staged chunks are thrown
	// away by the create that takes the load over; the packets recorded are
	// recorded again by it, the same (recordedSeed); a registered loading
	// campaign is skipped by every walker until it goes live.
	if err := e.store.Load(h.ctx, k, l.Token, 1, 1, amounts, e.progress(c.Count, 0)); err != nil {
		return redisstore.Activation{}, h.lostErr(c.ID, opErr("create", c.ID, mapStoreErr(err)))
	}
	opens, closes, err := e.record(h.ctx, c, spec, amounts, false)
	if err != nil {
		return redisstore.Activation{}, h.lostErr(c.ID, err)
	}
	if err := e.register(h.ctx, "create", c.ID, kindRedPacket, e.provisionalClose(opens, closes)); err != nil {
		return redisstore.Activation{}, h.lostErr(c.ID, err)
	}
	// The keeper stops before the activation: once live, a renewal would
	// find the campaign no longer loading. activate.lua checks the token.
	if h.stop() {
		return redisstore.Activation{}, &heldError{id: c.ID}
	}
	act, err = e.store.Activate(ctx, k, l.Token, opens, closes, e.cfg.DefaultWindow.Milliseconds())
	return act, e.activateErr(ctx, c.ID, kindRedPacket, spec, err)
}

// isHeld says whether err is a *heldError.
func isHeld(err error) bool {
	var held *heldError
	return errors.As(err, &held)
}

// progress reports loading progress, offset by the packets of shards
// loaded before.
func (e *Engine) progress(count, before int) func(int) {
	p := e.cfg.LoadProgress
	if p == nil {
		return nil
	}
	return func(done int) { p(before+done, count) }
}

// record writes the packets to Config.Packets, if any, and the terms
// when it keeps them, and returns the window to activate with: resolved
// by the Redis clock when resolve is set or the terms are recorded (the
// recorded window must be the one the campaign gets), else the spec's
// (0 for "now" and "the default window", which activation resolves).
func (e *Engine) record(ctx context.Context, c *Campaign, spec Spec, amounts []int64, resolve bool) (opens, closes int64, err error) {
	opens, closes = unixMs(spec.OpensAt), unixMs(spec.ClosesAt)
	if resolve || e.terms != nil {
		if opens, closes, err = e.window(ctx, spec); err != nil {
			return 0, 0, opErr("create", c.ID, err)
		}
	}
	if e.cfg.Packets == nil {
		return opens, closes, nil
	}
	if err := e.cfg.Packets.WritePackets(ctx, c.ID, amounts); err != nil {
		return 0, 0, opErr("create", c.ID, ledgerErr("record the packets", err))
	}
	if err := e.commit(ctx, c, amounts); err != nil {
		return 0, 0, opErr("create", c.ID, err)
	}
	// A window activation will refuse is not recorded: the campaign
	// never goes live.
	if e.terms != nil && closes > opens {
		t := termsOf(c, opens, closes)
		if e.co.blocks != nil {
			t.Block = int64(e.cfg.BlockSize)
		}
		if err := e.terms.WriteTerms(ctx, c.ID, t); err != nil {
			return 0, 0, opErr("create", c.ID, ledgerErr("record the terms", err))
		}
	}
	return opens, closes, nil
}

// recordedSeed gives a retried create the seed its first attempt drew,
// or the seed of the create whose load it takes over (create.go). A
// create that recorded its packets and died before the campaign went live
// is run again with the same id; with no seed in the spec it would draw a
// new split, which the recorder refuses as other packets. When the
// recorder holds terms for this id that match the spec, their seed is
// used, so the retry records the same packets and goes on. A create that
// died between recording its packets and its terms left no terms; the
// campaign's root still loading under its load holds the seed (begin
// wrote it), and that is used when its terms match the spec.
func (e *Engine) recordedSeed(ctx context.Context, spec Spec) (Spec, error) {
	if spec.Seed != nil || spec.ID == "" || e.cfg.Packets == nil {
		return spec, nil
	}
	want, err := spec.specTerms()
	if err != nil {
		return spec, err
	}
	same := func(t ledger.Terms) bool { return sameTerms(want, t) }
	if e.terms != nil {
		t, err := e.terms.Terms(ctx, spec.ID)
		switch {
		case err == nil && same(t):
			spec.Seed = &t.Seed
			return spec, nil
		case err != nil && !errors.Is(err, ledger.ErrNoPackets) && !errors.Is(err, ledger.ErrNoTerms):
			return spec, opErr("create", spec.ID, ledgerErr("read the recorded terms", err))
		}
	}
	snap, err := e.store.Status(ctx, e.store.NS().CampaignKeys(spec.ID))
	if errors.Is(err, redisstore.ErrNoCampaign) {
		return spec, nil
	}
	if err != nil {
		return spec, opErr("create", spec.ID, mapStoreErr(err))
	}
	m := snap.Meta
	if State(m["state"]) != StateLoading || m["load_token"] == "" || m["rebuild_token"] != "" {
		return spec, nil
	}
	if t := redisstore.TermsOf(m); m["seed"] != "" && same(t) {
		spec.Seed = &t.Seed
	}
	return spec, nil
}

// recordClose records an operator's close in the terms, when
// Config.Packets keeps them: a rebuild could not tell it from the window.
// The packets a rebuild found lost stay recorded.
func (e *Engine) recordClose(ctx context.Context, st *Status) error {
	if e.terms == nil || (st.CloseReason != CloseOperator && st.CloseReason != CloseCancelled) {
		return nil
	}
	t, err := e.terms.Terms(ctx, st.ID)
	if errors.Is(err, ledger.ErrNoPackets) {
		return nil // created before the packets were recorded: nothing to add to
	}
	if err != nil && !errors.Is(err, ledger.ErrNoTerms) {
		return ledgerErr("read the terms", err)
	}
	// The close time the root records (close.lua, by the Redis clock),
	// which a rebuild restores; the status's read time when it has none.
	closedAt := st.Now.UnixMilli()
	if snap, err := e.store.Status(ctx, e.root(kindRedPacket, st.ID)); err == nil && snap.Int("closed_at") > 0 {
		closedAt = snap.Int("closed_at")
	}
	lost, block := t.Lost, t.Block
	t = termsOf(&st.Campaign, st.OpensAt.UnixMilli(), st.ClosesAt.UnixMilli())
	t.CloseReason, t.ClosedAt, t.Lost, t.Block = st.CloseReason, closedAt, lost, block
	if err := e.terms.WriteTerms(ctx, st.ID, t); err != nil {
		return ledgerErr("record the close", err)
	}
	return nil
}

// activateErr is the error of an activation of campaign id of kind k. One refused for its window takes the
// campaign out of the registry again (dropRefused); one refused because
// another create took the load over is a *heldError.
func (e *Engine) activateErr(ctx context.Context, id string, k *kind, spec Spec, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redisstore.ErrStale):
		// Another create took the load over before this activation.
		return &heldError{id: id}
	case errors.Is(err, redisstore.ErrWindow):
		e.dropRefused(ctx, id, k)
		return opErr("create", id, windowError(spec, e.cfg.DefaultWindow, err))
	default:
		return opErr("create", id, mapStoreErr(err))
	}
}

// prepare validates a spec and splits it.
func (e *Engine) prepare(spec Spec) (*Campaign, []int64, error) {
	sp, err := spec.check()
	if err != nil {
		return nil, nil, err
	}
	if spec.ID == "" {
		spec.ID = newCampaignID()
	}
	var seed uint64
	if spec.Seed != nil {
		seed = *spec.Seed
	} else if seed, err = split.NewSeed(); err != nil {
		return nil, nil, opErr("create", spec.ID, err)
	}
	amounts, err := split.Split(sp, seed)
	if err != nil {
		return nil, nil, fromSplit(err)
	}
	return spec.campaign(sp, seed), amounts, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Grab hands user one packet of campaign id, at most once: every later
// grab by the same user, concurrent or not, answers Already with the same
// packet. Business outcomes (sold out, not open, closed) are in the Grant;
// an unknown campaign is ErrCampaignNotFound; a full queue is ErrBusy
// (nothing was attempted). If ctx ends before the grab was sent, ctx's
// error is returned and nothing was granted; if it ends while the grab is
// in flight, or the reply is lost, the error is ErrOutcomeUnknown, and a
// retry returns the user's packet if one was granted.
//
// Concurrent grabs of one campaign are coalesced into batch calls of the
// grab script (see Config.MaxBatch). The engine's observers hear it
// (Config.Observers).
func (e *Engine) Grab(ctx context.Context, id, user string) (Grant, error) {
	if obs := e.obs.load(); obs != nil {
		return e.grabObserved(ctx, obs, id, user)
	}
	return e.grab(ctx, id, user)
}

func (e *Engine) grab(ctx context.Context, id, user string) (Grant, error) {
	if err := ValidateCampaignID(id); err != nil {
		return Grant{}, err
	}
	if err := ValidateUserID(user); err != nil {
		return Grant{}, err
	}
	if e.settleBusy(id) {
		return Grant{}, ErrBusy
	}
	res, err := e.co.grab(ctx, id, user)
	if err != nil {
		if err == ErrBusy {
			return Grant{}, err
		}
		return Grant{}, opErr("grab", id, mapStoreErr(err))
	}
	return toGrant(id, user, res)
}

func toGrant(id, user string, r redisstore.GrabResult) (Grant, error) {
	if r.Outcome == redisstore.NoCampaign {
		return Grant{}, opErr("grab", id, ErrCampaignNotFound)
	}
	if (r.Outcome < redisstore.Granted || r.Outcome > redisstore.Closed) && r.Outcome != redisstore.Paused && r.Outcome != redisstore.Blocked {
		return Grant{}, opErr("grab", id, fmt.Errorf("unknown outcome code %d", r.Outcome))
	}
	g := Grant{Campaign: id, User: user, Outcome: Outcome(r.Outcome), Seq: r.Seq, Cents: r.Cents}
	if r.Outcome == redisstore.Granted && r.At > 0 {
		g.GrantedAt = time.UnixMilli(r.At).UTC()
	}
	return g, nil
}

// Held reads the packet user holds in campaign id, without grabbing: a
// Grant with outcome Already. It is ErrNoGrant when the user holds none,
// ErrCampaignNotFound when the campaign does not exist or is still
// loading. With Config.WaitReplicas a packet the replicas do not
// acknowledge in time is ErrOutcomeUnknown, never reported.
func (e *Engine) Held(ctx context.Context, id, user string) (Grant, error) {
	if err := ValidateCampaignID(id); err != nil {
		return Grant{}, err
	}
	if err := ValidateUserID(user); err != nil {
		return Grant{}, err
	}
	seq, cents, shards, held, err := e.store.Held(ctx, e.store.NS().CampaignKeys(id), user)
	if err == nil && shards > 1 {
		if home := HomeShard(user, shards); home != 0 {
			seq, cents, _, held, err = e.store.Held(ctx, e.co.learn(id, shards).keys[home], user)
		}
	}
	if err != nil {
		return Grant{}, opErr("held", id, mapStoreErr(err))
	}
	if !held {
		return Grant{}, opErr("held", id, ErrNoGrant)
	}
	return Grant{Campaign: id, User: user, Outcome: Already, Seq: seq, Cents: cents}, nil
}

// Status reads a campaign's state and counters. A one-shard campaign is
// read at one instant; a sharded one shard by shard, in one round trip.
func (e *Engine) Status(ctx context.Context, id string) (*Status, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	_, snaps, err := e.read(ctx, id)
	if err != nil {
		return nil, opErr("status", id, mapStoreErr(err))
	}
	return statusFrom(id, snaps)
}

// read reads every shard of campaign id, the root first, and the route
// they belong to.
func (e *Engine) read(ctx context.Context, id string) (*route, []redisstore.Snapshot, error) {
	v, err := e.store.Read(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return e.co.learn(id, len(v.Shards)), v.Snaps, nil
}

func statusFrom(id string, snaps []redisstore.Snapshot) (*Status, error) {
	root := snaps[0]
	m := root.Meta
	st := &Status{Now: time.UnixMilli(root.Now)}
	if State(m["state"]) == StateLoading {
		return nil, opErr("status", id, ErrCampaignNotFound)
	}
	setTerms(&st.Campaign, redisstore.TermsOf(m))
	st.ID = id
	st.State = State(m["state"])
	st.Shards = len(snaps)
	st.CloseReason = m["close_reason"]
	var moved int64
	for _, sn := range snaps {
		st.GrantedCount += sn.Int("granted_count")
		st.GrantedCents += sn.Int("granted_cents")
		st.RefundedCents += sn.Int("refunded_cents")
		st.RemainingCount += sn.PoolLen
		st.LostCount += sn.Int("lost_count")
		st.LostCents += sn.Int("lost_cents")
		moved += sn.Int("out_count") - sn.Int("in_count")
		if sn.Meta["paused"] == "1" {
			st.PausedShards++
		}
		st.BlockedUsers += sn.Int("blocked")
	}
	st.Paused = m["paused"] == "1"
	st.InFlight = moved
	st.RemainingCount += moved
	st.RemainingCents = st.Total - st.GrantedCents - st.RefundedCents
	if st.State != StateSettled {
		// The refund takes the lost packets' cents with the pool's.
		st.RemainingCents -= st.LostCents
	}
	st.State, st.CloseReason = stateInForce(st.State, st.CloseReason, root)
	return st, nil
}

// stateInForce is the state of a campaign recorded scheduled or open as
// its scripts see it now, by the Redis clock of its root's read: not open
// yet, open, or closed by time; any other state stays as it is.
func stateInForce(state State, reason string, root redisstore.Snapshot) (State, string) {
	if state != StateScheduled && state != StateOpen {
		return state, reason
	}
	switch {
	case root.Now < root.Int("opens_at"):
		return StateScheduled, reason
	case root.Now >= root.Int("closes_at"):
		return StateClosed, CloseTime
	default:
		return StateOpen, reason
	}
}

// CloseCampaign stops grabs of a campaign now (every shard, the root last).
// Before it opens this cancels it. Closing a closed campaign changes
// nothing and is not an error.
func (e *Engine) CloseCampaign(ctx context.Context, id string) (*Status, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	r, _, err := e.read(ctx, id)
	if err == nil {
		err = closeShards(ctx, e.store, r.keys, CloseOperator)
	}
	if err != nil {
		return nil, opErr("close", id, mapStoreErr(err))
	}
	st, err := e.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := e.recordClose(ctx, st); err != nil {
		return nil, opErr("close", id, err)
	}
	return st, nil
}

// Campaigns lists the live campaigns, those not yet settled, by close
// time (earliest first).
func (e *Engine) Campaigns(ctx context.Context) ([]string, error) {
	ids, err := e.store.Campaigns(ctx, redisstore.RedPacket)
	if err != nil {
		return nil, plainStoreErr(err)
	}
	return ids, nil
}

// Persistence says how the engine's Redis persists writes: "off" without
// an append-only file, else its appendfsync policy ("always", "everysec"
// or "no"). Only "always" keeps every acknowledged grant through a crash
// of Redis. It fails where CONFIG GET is not allowed (some managed
// services rename it).
func (e *Engine) Persistence(ctx context.Context) (string, error) {
	p, err := redisstore.Persistence(ctx, e.cfg.Redis)
	if err != nil {
		return "", fmt.Errorf("hongbao: persistence: %w", err)
	}
	return p, nil
}

// Ping checks that the engine's Redis answers.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.store.Ping(ctx); err != nil {
		return fmt.Errorf("hongbao: ping: %w", err)
	}
	return nil
}

// CountRequests adds n to the request count of second sec (Unix time) that
// every process using the same Redis shares, and returns the count after
// the addition; a count expires a few seconds after its second. A
// service-wide rate limit draws on it (httpapi's GlobalRate); the engine
// itself does not limit.
func (e *Engine) CountRequests(ctx context.Context, sec, n int64) (int64, error) {
	count, err := e.store.CountRequests(ctx, sec, n)
	if err != nil {
		return 0, plainStoreErr(err)
	}
	return count, nil
}

// mapStoreErr files store errors under the package's sentinels, keeping
// the cause in the chain.
func mapStoreErr(err error) error {
	var unknown *redisstore.UnknownError
	var short *luascript.ShortWaitError
	switch {
	case errors.Is(err, redisstore.ErrNoCampaign):
		return &kindError{kind: ErrCampaignNotFound, cause: err}
	case errors.Is(err, redisstore.ErrStale):
		// Create turns a load taken over into a wait (create.go); this is
		// for a caller that did not.
		return &kindError{kind: ErrLoadInterrupted, cause: err}
	case errors.Is(err, redisstore.ErrWindow):
		return &kindError{kind: ErrInvalidSpec, cause: err}
	case errors.Is(err, redisstore.ErrClientClosed):
		// Refused before sending: a closed client never sends again.
		return &kindError{kind: ErrClosed, cause: err}
	case errors.As(err, &short):
		// An unknown outcome too, for a reason of its own: the replicas.
		return &ReplicasError{Wanted: int(short.Want), Acked: int(short.Got), cause: err}
	case errors.As(err, &unknown):
		return &kindError{kind: ErrOutcomeUnknown, cause: err}
	case redisstore.NotRun(err):
		// Redis refused the script before running it (a migrating slot,
		// a failover, a restart): nothing was done, and a retry is safe.
		return &kindError{kind: ErrBusy, cause: err}
	case luascript.Unwritable(err):
		// Refused before running too, because it cannot take writes now
		// (too few replicas, a demoted primary).
		return &kindError{kind: ErrUnavailable, cause: err}
	}
	return err
}

// Namespace is the engine's namespace in Redis (Config.Namespace): "hb"
// unless set.
func (e *Engine) Namespace() string { return e.store.NS().Name() }
