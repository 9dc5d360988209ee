// Package scheduler runs a deployment's background work: settlement of
// grants into the ledger, closing campaigns whose window ended and
// refunding drained ones (both passes of the settlement worker), and the
// discount reaper. One process of many runs it at a time, elected by a
// lease in Redis (package leader), so that embedders get one settler per
// deployment, not one per process.
//
// Each election is proven against the ledger before settlement starts
// (leader.Config.Fence, ledger.LeaseFencer): the ledger records per lease
// the largest fencing token a holder settled under, and a holder whose
// token is not above it (the lease handed out again under a used token)
// settles nothing, releases the lease and takes it again above the
// recorded token. One ledger call per election of each lease (with
// Parts, per part). Drain takes no lease and raises nothing; with a
// webhook sink (no ledger) tokens rest on the Redis clock alone (package
// leader, "Fencing tokens only grow").
//
//	s, err := scheduler.New(scheduler.Config{Engine: eng, Settle: settle.Config{Redis: rc, Ledger: l}})
//	if err != nil { ... }
//	if err := s.Start(ctx); err != nil { ... }
//	defer s.Stop()
package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/leader"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// Config configures a Scheduler. Zero fields take their documented
// defaults.
type Config struct {
	// Settle configures the settlement worker. Settle.Redis and one of
	// Settle.Ledger or Settle.Sink are required; the lease lives in the
	// same Redis. Its Logger, when nil, is Logger. Its IdlePoll, when
	// zero, is 1s here: the lease holder listens on WakeChannel and
	// settles as soon as an engine publishes a grant, so its idle polls
	// only catch what a lost message missed.
	Settle settle.Config
	// Engine, if not nil, is the engine of this process: the scheduler
	// publishes its grants on the wake channel (see Publisher) so that
	// the scheduler, here or in another process, settles them at once
	// rather than at its next idle poll, and applies MaxBacklog to its
	// grabs. Its namespace and owner must be the settlement's (New and
	// Start refuse others). Default nil: no engine in this process
	// (hongbao settle); settlement, closing, refunds and the discount
	// reaper run all the same.
	Engine *hongbao.Engine
	// LeaseName names the lease: processes with the same name in one
	// namespace (Settle.Namespace) of one Redis elect one scheduler, or
	// with Parts above 1 share the parts of one deployment. Default
	// "scheduler".
	LeaseName string
	// Parts is the number of parts P of the deployment's settlement, the
	// same in every process of it (a process that finds a live one
	// counting otherwise is refused: ErrParts). With 1, one process at a
	// time holds the lease and settles everything. Above 1, each part
	// (the shards k of every campaign with settle.PartOf == p) is a lease
	// of its own, and the processes share the parts between them (see
	// parts.go), so that up to P processes settle at once; each part
	// costs a lease renewal every LeaseTTL/3. Default 1.
	Parts int
	// LeaseTTL is how long after its holder dies another process takes
	// over. Default leader.DefaultTTL (10s).
	LeaseTTL time.Duration
	// ReapEvery is how often the discount reaper (settle.Worker.Reap)
	// expires the reservations whose hold has passed, in the campaigns
	// the settlement owns, while this process holds the lease (with
	// parts, part 0). Default 1s.
	ReapEvery time.Duration
	// StopGrace is how long Stop (or the loss of the lease) lets the
	// settlement pass in flight finish before cancelling it. Default 10s.
	StopGrace time.Duration
	// MaxBacklog, when above 0, bounds each campaign's settlement
	// backlog: once a campaign has more than MaxBacklog stream entries
	// (grab batches) unsettled, grabs of it on Engine answer
	// hongbao.ErrBusy until settlement brings it back under. The backlog
	// is read every BacklogEvery, in every process (leader or not), never
	// per grab. Default 0: unbounded.
	MaxBacklog int64
	// BacklogEvery is how often the backlog is read for MaxBacklog.
	// Default 1s.
	BacklogEvery time.Duration
	// OnLease, if not nil, hears true when this process takes the lease
	// and false when it lets it go (a metric, a log line).
	OnLease func(held bool)
	// Logger receives the elections and the reaper's failures. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Validate checks the configuration, and the settlement's in it. A
// refusal is a *hongbao.ConfigError (errors.Is(err,
// hongbao.ErrInvalidConfig)) naming the field from this package,
// "scheduler.Config.Parts"; one of Settle's also matches settle.ErrConfig
// and keeps its *settle.ConfigError in the chain.
func (c Config) Validate() error {
	refuse := func(field, value, reason string) error {
		return &hongbao.ConfigError{Field: "scheduler.Config." + field, Value: value, Reason: reason}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"LeaseTTL", c.LeaseTTL}, {"ReapEvery", c.ReapEvery}, {"StopGrace", c.StopGrace}, {"BacklogEvery", c.BacklogEvery}} {
		if f.v < 0 {
			return refuse(f.name, f.v.String(), "must not be negative")
		}
	}
	switch {
	case c.LeaseTTL != 0 && c.LeaseTTL < leader.MinTTL:
		return refuse("LeaseTTL", c.LeaseTTL.String(), "must be at least "+leader.MinTTL.String())
	case c.LeaseTTL%time.Millisecond != 0:
		return refuse("LeaseTTL", c.LeaseTTL.String(), "must be whole milliseconds")
	case strings.ContainsAny(c.LeaseName, "{}"):
		return refuse("LeaseName", c.LeaseName, "must not contain braces")
	case c.MaxBacklog < 0:
		return refuse("MaxBacklog", strconv.FormatInt(c.MaxBacklog, 10), "must not be negative")
	case c.MaxBacklog > 0 && c.Engine == nil:
		return refuse("MaxBacklog", strconv.FormatInt(c.MaxBacklog, 10), "needs scheduler.Config.Engine: the grabs it bounds are the engine's")
	case c.Parts < 0 || c.Parts > MaxParts:
		return refuse("Parts", strconv.Itoa(c.Parts), fmt.Sprintf("must be within 1..%d (0 for 1)", MaxParts))
	case c.Settle.Parts != nil:
		return refuse("Settle.Parts", "", "is the scheduler's own; leave it nil")
	}
	if err := c.Settle.Validate(); err != nil {
		var se *settle.ConfigError
		if errors.As(err, &se) {
			return &hongbao.ConfigError{Field: "scheduler.Config.Settle." + strings.TrimPrefix(se.Field, "Config."),
				Value: se.Value, Reason: se.Reason, Err: err}
		}
		return err
	}
	if ns, _ := redisstore.ParseNamespace(c.Settle.Namespace); c.Engine != nil && c.Engine.Namespace() != ns.Name() {
		return refuse("Settle.Namespace", ns.Name(), fmt.Sprintf("is not the engine's namespace %q: the scheduler would settle, reap and wake other campaigns than the engine's", c.Engine.Namespace()))
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.LeaseName = cmp.Or(c.LeaseName, leader.DefaultName)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, leader.DefaultTTL)
	c.Parts = cmp.Or(c.Parts, 1)
	c.ReapEvery = cmp.Or(c.ReapEvery, time.Second)
	c.StopGrace = cmp.Or(c.StopGrace, 10*time.Second)
	c.BacklogEvery = cmp.Or(c.BacklogEvery, time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Settle.IdlePoll = cmp.Or(c.Settle.IdlePoll, time.Second)
	c.Settle.Logger = cmp.Or(c.Settle.Logger, c.Logger)
	return c
}

// Scheduler owns the lease election and, while this process holds the
// lease, the settlement worker and the discount reaper. Use New, Start
// and Stop.
type Scheduler struct {
	cfg    Config
	worker *settle.Worker
	one    *onePart // with one part: the announcement and the elector; nil with several
	parts  *parts   // with several parts; nil with one
	single *single  // with one part: the settle.PartHolder
	log    *slog.Logger
	pub    *Publisher // the engine's grants on the wake channel; nil without one
	ns     redisstore.Namespace

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // the backlog loop's, and with parts the balancer's and the listener's
}

// single is the settle.PartHolder of a scheduler of one part: it holds part 0,
// the only one, while it holds the lease, and during a Drain, which takes
// no lease.
type single struct {
	token atomic.Int64
	drain atomic.Bool
}

func (o *single) Parts() int { return 1 }

func (o *single) Held(int) (int64, bool) {
	t := o.token.Load()
	return t, t != 0 || o.drain.Load()
}

// New returns a Scheduler, not yet started.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ns, _ := redisstore.ParseNamespace(cfg.Settle.Namespace) // checked by Validate
	var err error
	s := &Scheduler{cfg: cfg, ns: ns, log: cfg.Logger.With("component", "scheduler", "namespace", ns.Name())}
	lease := cfg.LeaseName
	if cfg.Parts > 1 {
		lease += ":part:0"
	}
	if err := (leader.Config{Redis: cfg.Settle.Redis, Prefix: ns.LeasePrefix(), Name: lease, TTL: cfg.LeaseTTL}).Validate(); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if cfg.Parts > 1 {
		s.parts = newParts(s, memberID(cfg.Settle.Consumer))
		cfg.Settle.Parts = s.parts
	} else {
		s.single = &single{}
		cfg.Settle.Parts = s.single
		s.one = newOnePart(s, memberID(cfg.Settle.Consumer))
	}
	w, err := settle.New(cfg.Settle)
	if err != nil {
		return nil, err
	}
	s.worker = w
	return s, nil
}

// memberID names this process among the deployment's: its consumer name
// and a random suffix, since two processes may share a consumer name.
func memberID(consumer string) string {
	if consumer == "" {
		consumer, _ = os.Hostname()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return consumer + "-" + hex.EncodeToString(b[:])
}

// Worker returns the settlement worker (its Stats, its Backlog).
func (s *Scheduler) Worker() *settle.Worker { return s.worker }

// Parts is the number of parts of the deployment's settlement
// (Config.Parts; 1 unless set).
func (s *Scheduler) Parts() int { return s.cfg.Parts }

// IsLeader says whether this process holds the lease now; with several
// parts, whether it holds one of them at least.
func (s *Scheduler) IsLeader() bool {
	if s.parts != nil {
		return len(s.parts.list()) > 0
	}
	return s.one.isLeader()
}

// HeldParts lists the parts this process holds now: with one part, [0]
// while it holds the lease.
func (s *Scheduler) HeldParts() []int {
	if s.parts != nil {
		return s.parts.list()
	}
	if _, ok := s.single.Held(0); ok {
		return []int{0}
	}
	return nil
}

// Start announces this process and joins the election (with several
// parts: takes its parts), and starts reading the backlog when
// Config.MaxBacklog is set. The work starts when this process takes the
// lease, and stops when it loses it, Stop is called or ctx ends. Start
// fails with ErrParts when a live process of the deployment counts
// another number of parts (see one.go); a process counting another number
// that is found live later makes this one let its lease or parts go until
// every process agrees.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("scheduler: already started")
	}
	if err := s.checkOwner(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	if s.one != nil {
		s.one.start(ctx)
	}
	if err := s.checkParts(ctx); err != nil {
		cancel()
		return err
	}
	if e := s.cfg.Engine; e != nil {
		s.pub = Publish(s.cfg.Settle.Redis, e)
	}
	s.cancel, s.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	if s.one != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.one.run(ctx)
		}()
	}
	if s.parts != nil {
		_ = s.worker.Start(context.WithoutCancel(ctx))
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.listen(ctx)
		}()
		go func() {
			defer wg.Done()
			s.parts.run(ctx)
		}()
	}
	if s.cfg.MaxBacklog > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			BoundBacklog(ctx, s.cfg.Settle.Redis, s.cfg.Engine, s.cfg.MaxBacklog, s.cfg.BacklogEvery, s.log)
		}()
	}
	go func() {
		defer close(s.done)
		wg.Wait()
	}()
	return nil
}

// checkOwner refuses to start a scheduler whose engine records another
// owner in its campaigns than the one the worker settles for: none of the
// engine's campaigns would ever be settled here. An identity that cannot
// be read yet (the ledger down) is left to the passes, which read it again.
func (s *Scheduler) checkOwner(ctx context.Context) error {
	e := s.cfg.Engine
	if e == nil {
		return nil
	}
	mine, err := s.worker.Owner(ctx)
	if err != nil {
		s.log.Warn("scheduler: cannot read the settlement's owner yet; going on", "err", err)
		return nil
	}
	theirs, err := e.Owner(ctx)
	if err != nil {
		s.log.Warn("scheduler: cannot read the engine's owner yet; going on", "err", err)
		return nil
	}
	if theirs != "" && mine != theirs {
		return fmt.Errorf("scheduler: the engine records owner %q in its campaigns and the settlement settles for %q: none of the engine's campaigns would be settled (set hongbao.Config.Owner and settle.Config.Owner alike, or leave both to the ledger)", theirs, mine)
	}
	return nil
}

// checkParts refuses to start a process whose number of parts differs from
// a live one's. It announces this process (its first round): with one
// part it starts the elector, with several it takes the first parts. Any
// other failure (Redis not answering yet) is left to the rounds that
// follow.
func (s *Scheduler) checkParts(ctx context.Context) error {
	var err error
	if s.parts == nil {
		err = s.one.round(ctx, true)
	} else {
		err = s.parts.round(ctx)
	}
	if errors.Is(err, ErrParts) {
		return err
	}
	if err != nil {
		s.log.Warn("scheduler: cannot check the deployment's parts yet; going on", "err", err)
	}
	return nil
}

// Stop leaves the election and waits for the work to end: the settlement
// pass in flight finishes within Config.StopGrace, the reaper stops, and
// the lease (or every part) is released.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	if s.parts != nil {
		s.worker.StopAfterPass(s.cfg.StopGrace)
	} else {
		s.one.halt()
	}
	s.cancel()
	<-s.done
	if e := s.cfg.Engine; e != nil {
		s.pub.Stop()
		e.SetSettleBusy(nil)
	}
	s.cancel, s.done = nil, nil
}

// Drain settles until nothing is pending or undelivered in any campaign
// (settle.Worker.Drain). With one part it needs no lease, as an
// operator's one-off; with several it takes this process's share of the
// parts, settles them, and ends once every part, its own or another
// process's, has nothing left; then it lets its parts go. Either way it
// announces itself while it drains, and it fails with ErrParts, as Start
// does, when a live process counts another number of parts: at once,
// having settled nothing, or, when one is found later, between two
// batches. The scheduler must not be started.
func (s *Scheduler) Drain(ctx context.Context) (settle.Progress, error) {
	s.mu.Lock()
	if s.cancel != nil {
		s.mu.Unlock()
		return settle.Progress{}, errors.New("scheduler: Drain of a started scheduler")
	}
	s.mu.Unlock()
	if s.parts == nil {
		return s.drainOne(ctx)
	}
	if err := s.checkParts(ctx); err != nil {
		s.parts.leave()
		return settle.Progress{}, err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.parts.run(pctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	return s.worker.Drain(ctx)
}

// drainOne is Drain with one part: no lease, an announcement.
func (s *Scheduler) drainOne(ctx context.Context) (settle.Progress, error) {
	if err := s.one.round(ctx, false); errors.Is(err, ErrParts) {
		return settle.Progress{}, err
	} else if err != nil {
		s.log.Warn("scheduler: cannot check the deployment's parts yet; going on", "err", err)
	}
	dctx, refuse := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.one.drain(dctx, refuse)
	}()
	defer func() {
		refuse(nil)
		<-done
		withdraw(s, s.one.member)
	}()
	s.single.drain.Store(true)
	defer s.single.drain.Store(false)
	p, err := s.worker.Drain(dctx)
	if cause := context.Cause(dctx); errors.Is(cause, ErrParts) {
		return p, cause
	}
	return p, err
}

// lease runs settlement and the discount reaper while this process holds
// the lease (one part). The worker's passes outlive the term: on a loss or
// a stop the pass in flight finishes (within StopGrace), so neither leaves
// a half-done batch behind. The reaper stops with the term: a reap is one
// script per shard and idempotent, so one cut short, or run by two holders
// across a handover, changes nothing twice.
func (s *Scheduler) lease(ctx context.Context, t leader.Term) {
	s.log.Info("scheduler lease acquired: running settlement and the discount reaper", "token", t.Token)
	if s.cfg.OnLease != nil {
		s.cfg.OnLease(true)
	}
	s.single.token.Store(t.Token)
	if err := s.worker.Start(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("settlement did not start", "err", err)
	}
	reaped, listened := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(listened)
		s.listen(ctx)
	}()
	go func() {
		defer close(reaped)
		s.reap(ctx)
	}()
	<-ctx.Done()
	<-reaped
	<-listened
	s.worker.StopAfterPass(s.cfg.StopGrace)
	s.single.token.Store(0)
	if s.cfg.OnLease != nil {
		s.cfg.OnLease(false)
	}
	s.log.Info("scheduler lease released: settlement stopped after its current pass")
}

// fence is the leader.Config.Fence of the lease name: it raises the
// lease's token in the ledger that settlement writes into
// (ledger.LeaseFencer), under the lease's Redis name, "<prefix>{<name>}",
// so that a term whose token the ledger already saw (the lease handed out
// again under a used token: a counter lost in Redis and a clock behind)
// settles nothing. Once per election, never per batch. nil without a
// ledger (a webhook sink): then tokens rest on the Redis clock alone.
func (s *Scheduler) fence(name string) func(context.Context, leader.Term) error {
	l := s.cfg.Settle.Ledger
	if l == nil {
		return nil
	}
	lease := s.ns.LeasePrefix() + "{" + name + "}"
	return func(ctx context.Context, t leader.Term) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL)
		defer cancel()
		err := l.RaiseLease(ctx, lease, t.Token)
		var stale *ledger.StaleLeaseError
		if errors.As(err, &stale) {
			return &leader.StaleTokenError{Token: t.Token, Recorded: stale.Recorded}
		}
		return err
	}
}

// reap runs the discount reaper (settle.Worker.Reap: the campaigns this
// deployment owns) every ReapEvery until ctx ends, with or without an
// Engine: hongbao settle reaps as serve does.
func (s *Scheduler) reap(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReapEvery)
	defer t.Stop()
	for {
		if _, err := s.worker.Reap(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("discount reaper: a round failed; the next tries again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// BoundBacklog reads every campaign's settlement backlog each every
// (default 1s) until ctx ends, and makes eng answer hongbao.ErrBusy to
// grabs of the campaigns with more than limit unsettled stream entries
// (Engine.SetSettleBusy); at the end it lifts the bound. A failed read
// keeps the last verdict: the bound neither opens nor closes on a blip. A
// Scheduler with Config.MaxBacklog runs it; a process that serves grabs
// without a scheduler (serve --settle=false) may run it alone.
func BoundBacklog(ctx context.Context, rc rueidis.Client, eng *hongbao.Engine, limit int64, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	defer eng.SetSettleBusy(nil)
	t := time.NewTicker(every)
	defer t.Stop()
	ns, _ := redisstore.ParseNamespace(eng.Namespace()) // the engine checked it
	store := redisstore.New(rc).WithNamespace(ns)
	for {
		if busy, err := overBound(ctx, store, rc, limit); err == nil {
			eng.SetSettleBusy(busy)
		} else if ctx.Err() == nil {
			log.Warn("backlog bound: reading the backlog failed; keeping the last verdict", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// overBound lists the campaigns whose unsettled entries pass limit.
func overBound(ctx context.Context, store *redisstore.Store, rc rueidis.Client, limit int64) ([]string, error) {
	ids, err := store.Campaigns(ctx, redisstore.RedPacket)
	if err != nil {
		return nil, err
	}
	var busy []string
	for _, id := range ids {
		b, err := settle.ReadBacklog(ctx, rc, store.NS().Name(), id)
		if errors.Is(err, settle.ErrNoCampaign) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if b.Unsettled() > limit {
			busy = append(busy, id)
		}
	}
	sort.Strings(busy)
	return busy, nil
}
