// Package scheduler runs a deployment's background work: settlement of
// grants into the ledger, closing campaigns whose window ended and
// refunding drained ones (both passes of the settlement worker), and the
// discount reaper. One process of many runs it at a time, elected by a
// lease in Redis (package leader), so that embedders get one settler per
// deployment, not one per process.
//
//	s, err := scheduler.New(scheduler.Config{Engine: eng, Settle: settle.Config{Redis: rc, Ledger: l}})
//	if err != nil { ... }
//	if err := s.Start(ctx); err != nil { ... }
//	defer s.Stop()
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/leader"
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
	// runs its discount reaper while it holds the lease, publishes its
	// grants on WakeChannel (see Publisher) so that the scheduler, here or
	// in another process, settles them at once rather than at its next
	// idle poll, and applies MaxBacklog to its grabs.
	// Default nil: settlement only (hongbao settle).
	Engine *hongbao.Engine
	// LeaseName names the lease: processes with the same name on one
	// Redis elect one scheduler. Default "scheduler".
	LeaseName string
	// LeaseTTL is how long after its holder dies another process takes
	// over. Default leader.DefaultTTL (10s).
	LeaseTTL time.Duration
	// ReapEvery is how often the discount reaper expires reservations
	// whose hold has passed. Default 1s.
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

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Settle.Redis == nil {
		return errors.New("scheduler: Config.Settle.Redis is required")
	}
	if c.LeaseTTL < 0 || c.ReapEvery < 0 || c.StopGrace < 0 || c.BacklogEvery < 0 || c.MaxBacklog < 0 {
		return errors.New("scheduler: durations and MaxBacklog must not be negative")
	}
	if c.MaxBacklog > 0 && c.Engine == nil {
		return errors.New("scheduler: Config.MaxBacklog needs Config.Engine")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.LeaseName == "" {
		c.LeaseName = redisstore.SchedulerLease
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = leader.DefaultTTL
	}
	if c.ReapEvery == 0 {
		c.ReapEvery = time.Second
	}
	if c.StopGrace == 0 {
		c.StopGrace = 10 * time.Second
	}
	if c.BacklogEvery == 0 {
		c.BacklogEvery = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Settle.IdlePoll == 0 {
		c.Settle.IdlePoll = time.Second
	}
	if c.Settle.Logger == nil {
		c.Settle.Logger = c.Logger
	}
	return c
}

// Scheduler owns the lease election and, while this process holds the
// lease, the settlement worker and the discount reaper. Use New, Start
// and Stop.
type Scheduler struct {
	cfg    Config
	worker *settle.Worker
	el     *leader.Elector
	log    *slog.Logger
	pub    *Publisher // the engine's grants on WakeChannel; nil without one

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // the backlog loop's
}

// New returns a Scheduler, not yet started.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w, err := settle.New(cfg.Settle)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, worker: w, log: cfg.Logger.With("component", "scheduler")}
	s.el, err = leader.New(leader.Config{
		Redis: cfg.Settle.Redis, Name: cfg.LeaseName, TTL: cfg.LeaseTTL, Logger: cfg.Logger, OnElected: s.term,
	})
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return s, nil
}

// Worker returns the settlement worker (its Stats, its Backlog).
func (s *Scheduler) Worker() *settle.Worker { return s.worker }

// IsLeader says whether this process holds the lease now.
func (s *Scheduler) IsLeader() bool { return s.el.IsLeader() }

// Start joins the election, and starts reading the backlog when
// Config.MaxBacklog is set. The work starts when this process takes the
// lease, and stops when it loses it, Stop is called or ctx ends.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("scheduler: already started")
	}
	if err := s.el.Start(ctx); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if e := s.cfg.Engine; e != nil {
		s.pub = Publish(s.cfg.Settle.Redis, e)
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if s.cfg.MaxBacklog > 0 {
			BoundBacklog(ctx, s.cfg.Settle.Redis, s.cfg.Engine, s.cfg.MaxBacklog, s.cfg.BacklogEvery, s.log)
		}
	}()
	return nil
}

// Stop leaves the election and waits for the work to end: the settlement
// pass in flight finishes within Config.StopGrace, the reaper stops.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	s.el.Stop()
	s.cancel()
	<-s.done
	if e := s.cfg.Engine; e != nil {
		e.OnGranted(nil)
		s.pub.Stop()
		e.SetSettleBusy(nil)
	}
	s.cancel, s.done = nil, nil
}

// term runs settlement and the discount reaper while this process holds
// the lease. The worker's passes outlive the term: on a loss or a stop
// the pass in flight finishes (within StopGrace), so neither leaves a
// half-done batch behind. The reaper stops with the term: a reap is one
// script per shard and idempotent, so one cut short, or run by two holders
// across a handover, changes nothing twice.
func (s *Scheduler) term(ctx context.Context, t leader.Term) {
	s.log.Info("scheduler lease acquired: running settlement and the discount reaper", "token", t.Token)
	if s.cfg.OnLease != nil {
		s.cfg.OnLease(true)
	}
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
		if e := s.cfg.Engine; e != nil {
			e.RunDiscountReaper(ctx, s.cfg.ReapEvery, func(err error) {
				s.log.Warn("discount reaper: a round failed; the next tries again", "err", err)
			})
		}
	}()
	<-ctx.Done()
	<-reaped
	<-listened
	s.worker.StopAfterPass(s.cfg.StopGrace)
	if s.cfg.OnLease != nil {
		s.cfg.OnLease(false)
	}
	s.log.Info("scheduler lease released: settlement stopped after its current pass")
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
	store := redisstore.New(rc)
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
	ids, err := store.Campaigns(ctx)
	if err != nil {
		return nil, err
	}
	var busy []string
	for _, id := range ids {
		b, err := settle.ReadBacklog(ctx, rc, id)
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
