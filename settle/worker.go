// Package settle turns grants recorded in Redis into ledger entries, exactly
// once, whatever crashes in between.
//
// A Worker reads each live campaign's grants stream with the consumer group
// "settle" under a stable consumer name. It writes a whole batch of grants
// in one ledger transaction and acknowledges the stream entries only after
// the commit, so a crash at any point leaves entries pending, never lost;
// the ledger's idempotency (a grant's key is campaign + seq) makes the
// replay after a restart a no-op. A grant the ledger refuses as conflicting
// goes to the campaign's dead stream, with its entry acknowledged in the
// same script, and is counted as an incident. When the database is down
// the worker backs off: it neither acknowledges, nor dead-letters, nor
// reclaims. A campaign whose every shard is closed, and whose every
// shard's stream, read after the close, is delivered and acknowledged,
// gets its refund (total - granted) recorded once in the ledger, then in
// Redis, and leaves the registry; its keys expire after a retention period.
// With a ledger, the campaign's user balances are rolled up afterwards,
// off the passes' path (RollUps).
//
// Discount campaigns settle through the same passes (discounts.go): their
// confirms streams into the ledger's discounts, their leftover refunded
// once they are closed, drained and hold no reservation. A Sink that is
// not a DiscountSink (a webhook) leaves them unsettled.
package settle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Sink is where settled entries go. ledger.Ledger is one; package webhook
// has another. Every method must be idempotent: after a crash the worker
// sends again what it sent before the crash. A Sink settles red packet
// campaigns; to settle discount campaigns too it must also be a
// DiscountSink (ApplyDiscounts), else the worker leaves them unsettled
// and logs it once. Optional too: TotalsSink, for ReconcileSink, and an
// Identity method naming the wallet it settles into (Config.Owner).
type Sink interface {
	// Fund records the campaign's funding, once.
	Fund(ctx context.Context, c ledger.Campaign) error
	// ApplyGrants writes a batch of one campaign's grants atomically and
	// says which it refused as conflicting. An error wrapping
	// ledger.ErrInvalid says that a grant of the batch can never be
	// written, one wrapping ledger.ErrRefused that writing it would break
	// the ledger's invariants (a grant after the campaign's refund, an
	// escrow below zero): either way the worker isolates its entry and
	// moves it to the dead stream. Any other error leaves the entries
	// pending, to be tried again.
	ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error)
	// Refund records the campaign's refund, once. An error wrapping
	// ledger.ErrRefused (a refund that would not empty the escrow
	// exactly) leaves the campaign unsettled with a note in its dead
	// stream, for an operator.
	Refund(ctx context.Context, campaign string, cents int64) error
	// Ping tells an outage (error) from a refusal (nil) after a failure.
	Ping(ctx context.Context) error
}

// Config configures a Worker. Zero fields take their documented defaults.
type Config struct {
	// Redis is the client of the Redis the campaigns live in. Required.
	Redis rueidis.Client
	// Owner is the identity this worker settles for: it settles, closes,
	// refunds and reaps only the campaigns that record it as their owner
	// (hongbao.Config.Owner), and claims those that record none (see
	// owner.go). Default: the Identity of the Ledger or of the Sink when
	// it has one (a webhook.Sink does).
	Owner string
	// Namespace is the deployment's namespace in Redis: the worker
	// settles the campaigns of this namespace only. It must be the
	// namespace of the engines that create them (hongbao.Config.Namespace).
	// Default "hb".
	Namespace string
	// Ledger receives the entries: the built-in double-entry ledger.
	// Exactly one of Ledger and Sink is required.
	Ledger ledger.Ledger
	// Sink receives the entries instead of a Ledger: a host's own wallet,
	// for example through package webhook. Without a ledger to read back,
	// the refund is not cross-checked against written grants and
	// Reconcile is not available.
	Sink Sink
	// Consumer is this worker's name in the consumer group; it must be
	// stable across restarts so the worker finds its own pending entries.
	// Default: the host name.
	Consumer string
	// ReadCount is how many stream entries one read takes; an entry holds
	// the grants of one grab batch (up to 512 by default). A shard of a
	// campaign of S shards is read ReadCount x S at a time, since its
	// batches are a shard's share of the grabs. Default 16.
	ReadCount int64
	// ReclaimIdle is how long an entry may stay pending at another
	// consumer before this one takes it over (that consumer is presumed
	// dead). Default 30s.
	ReclaimIdle time.Duration
	// Poll is the pause after the first pass that found nothing to do.
	// Each further idle pass doubles it, up to IdlePoll; a pass that
	// finds work, or a Wake, resets it. Default 20ms.
	Poll time.Duration
	// IdlePoll caps the pause between idle passes: how long a new grant
	// may wait to be seen by a worker that is not woken (Wake). An idle
	// pass with no campaign costs two Redis calls, so an idle worker
	// makes about 2/IdlePoll calls a second. Default 100ms.
	IdlePoll time.Duration
	// MaxBackoff caps the pause after a ledger failure. Default 5s.
	MaxBackoff time.Duration
	// PassTimeout bounds one pass, and so every ledger and Redis call in
	// it: a call that hangs (a database gone without a reset, a lock never
	// granted) would otherwise stall settlement until a restart. A pass
	// cut short loses nothing: its committed batches are acknowledged, the
	// rest stays pending and the next pass settles it, idempotently.
	// Default 2 minutes.
	PassTimeout time.Duration
	// Retention is how long a settled campaign's keys stay in Redis once
	// a reconcile against the Ledger finds no difference (a campaign that
	// does not reconcile keeps its keys for an operator). Default 7 days;
	// negative keeps them.
	Retention time.Duration
	// DrawDataRetention is how long after a campaign's refund the ledger
	// keeps its fairness draw data: the salts and the holder key that the
	// draw log and the proofs read (docs/fairness.md). Once it has passed,
	// the worker's sweep deletes them (PurgeDrawData); the commitment, its
	// root and the ledger's entries stay. Default
	// fairness.DefaultRetention (400 days); negative keeps them for ever.
	DrawDataRetention time.Duration
	// Only, if not empty, limits the worker to these campaigns, red
	// packet or discount campaigns by their ids. Default: every registered
	// campaign.
	Only []string
	// Parts, if not nil, limits the worker to the shards of the parts
	// this process holds (package scheduler's parts; see parts.go): their
	// streams, and the campaign-wide steps of the campaigns whose root
	// shard is in one of them. Default nil: every shard of every campaign.
	Parts PartHolder
	// LegacyScripts: see hongbao.Config.LegacyScripts.
	LegacyScripts bool
	// WaitReplicas, when above 0, settles only what that many replicas
	// hold: before each ledger transaction (a batch of grants, a refund)
	// the worker waits until the replicas acknowledge every write of the
	// shard's node so far, the grants read among them (see
	// redisstore.SyncReplicas for why a write precedes the WAIT). Without
	// it, a failover to a replica that missed the last grants would leave
	// in the ledger packets that the new primary hands out again. A short
	// wait writes nothing: the batch stays pending, neither acknowledged
	// nor dead-lettered, and the pass fails and is retried after a
	// backoff. The transfers between shards that the worker finishes
	// wait for the replicas as the engine's do (redisstore.Recover).
	// Use the engine's hongbao.Config.WaitReplicas. Default 0.
	WaitReplicas int
	// WaitTimeout bounds each wait for replicas. Default 500ms.
	WaitTimeout time.Duration
	// Logger receives incidents and progress. Default: slog.Default().
	Logger *slog.Logger
	// Tracer, if not nil, records a span of each settlement batch
	// (hongbao.settle.batch) and of its ledger transaction (OpenTelemetry).
	// Default nil: no spans.
	Tracer trace.Tracer
	// Observers hear each result of the worker as it counts it in Stats
	// (hongbao.Observer.ObserveSettle): grants and discounts written,
	// replays, conflicts, refusals, malformed and deleted entries, failed
	// passes, foreign campaigns, refunds, reaped reservations. Their other
	// methods are not called. Default none.
	Observers []hongbao.Observer
}

// Stats counts what a worker did.
type Stats struct {
	Grants    int64 // grants newly written to the ledger
	Replayed  int64 // grants the ledger already had
	Entries   int64 // stream entries acknowledged
	Conflicts int64 // grants refused by the ledger as conflicting (incidents)
	Malformed int64 // stream entries that could not be read (incidents)
	Deleted   int64 // pending entries Redis reported deleted (alarms)
	Refunds   int64 // campaigns refunded and settled
	Failures  int64 // ledger or Redis failures (backed off)
	Discounts int64 // confirmed discounts newly written (discount campaigns)
	// Refused counts what the ledger refused, or would have refused, as
	// impossible (incidents, each with a dead-stream entry): a grant or
	// discount after the campaign's refund or beyond its escrow, a refund
	// that disagrees with the ledger's grants.
	Refused int64
	// RolledUp counts campaigns whose users' balances the worker rolled
	// up in the ledger (RollUps), after their refund.
	RolledUp int64
	// Foreign counts the passes over campaigns that record another owner
	// than this worker's (Config.Owner): skipped, never settled. A
	// deployment sharing a namespace with another by mistake.
	Foreign int64
	// Reaped counts the discount reservations the worker expired (Reap).
	Reaped int64
}

// Worker settles campaigns. Use New, then Start and Stop, or Pass / Drain.
type Worker struct {
	cfg   Config
	store *redisstore.Store
	sink  Sink
	log   *slog.Logger

	mu sync.Mutex
	// What the worker remembers of each campaign between passes, dropped
	// once the campaign leaves the registry (forget), so that a process
	// that runs for months holds only the live campaigns.
	funded  map[string]bool
	claimAt map[stream]string // where the last reclaim stopped
	swept   map[stream]int64  // the term of its part when last swept
	// foreignOf: the campaigns found foreign, and their owner, logged once.
	foreignOf map[string]string
	ownerID   atomic.Pointer[string] // Owner, once read

	draining atomic.Bool // Drain runs: count what other processes' parts hold too

	grants, replayed, entries, conflicts, malformed, deleted, refunds, failures atomic.Int64
	discounts, refused, rolledUp, foreign, reaped                               atomic.Int64
	noDiscounts                                                                 sync.Once // warned that the sink takes no discounts

	// failing is set while passes fail: the next pass then pings the
	// sink before it touches any stream, so that during an outage the
	// worker neither re-reads its pending entries (raising their delivery
	// counts) nor reclaims other consumers' entries it cannot write.
	failing atomic.Bool

	wake     chan struct{}                    // Wake: end an idle pause now
	rollWake chan struct{}                    // a campaign was refunded: roll it up
	backlog  atomic.Pointer[map[string]int64] // per campaign, as the last pass left it

	stop   context.CancelFunc
	halt   chan struct{} // closed to end the passes after the current one
	done   chan struct{}
	startM sync.Mutex
}

// New returns a Worker, or a *ConfigError (ErrConfig) for a Config that
// Validate refuses.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sink := cfg.Sink
	if cfg.Ledger != nil {
		sink = cfg.Ledger
	}
	if cfg.Consumer == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "settle"
		}
		cfg.Consumer = h
	}
	if cfg.ReadCount <= 0 {
		cfg.ReadCount = 16
	}
	if cfg.ReclaimIdle <= 0 {
		cfg.ReclaimIdle = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.IdlePoll <= 0 {
		cfg.IdlePoll = 100 * time.Millisecond
	}
	cfg.IdlePoll = max(cfg.IdlePoll, cfg.Poll)
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.PassTimeout <= 0 {
		cfg.PassTimeout = 2 * time.Minute
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = 500 * time.Millisecond
	}
	if cfg.DrawDataRetention == 0 {
		cfg.DrawDataRetention = fairness.DefaultRetention
	}
	ns, _ := redisstore.ParseNamespace(cfg.Namespace) // checked by Validate
	store := redisstore.New(cfg.Redis)
	if cfg.LegacyScripts {
		store = redisstore.NewLegacy(cfg.Redis)
	}
	store = store.WithNamespace(ns)
	if cfg.WaitReplicas > 0 {
		// The transfers the worker finishes (Recover) wait as the
		// engine's do.
		store = store.WithWait(cfg.WaitReplicas, cfg.WaitTimeout)
	}
	return &Worker{
		cfg: cfg, store: store, sink: sink, log: cfg.Logger.With("component", "settle", "consumer", cfg.Consumer),
		funded: map[string]bool{}, claimAt: map[stream]string{}, swept: map[stream]int64{}, foreignOf: map[string]string{},
		wake:     make(chan struct{}, 1),
		rollWake: make(chan struct{}, 1),
	}, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Grants: w.grants.Load(), Replayed: w.replayed.Load(), Entries: w.entries.Load(),
		Conflicts: w.conflicts.Load(), Malformed: w.malformed.Load(), Deleted: w.deleted.Load(),
		Refunds: w.refunds.Load(), Failures: w.failures.Load(), Discounts: w.discounts.Load(),
		Refused: w.refused.Load(), RolledUp: w.rolledUp.Load(), Foreign: w.foreign.Load(), Reaped: w.reaped.Load(),
	}
}

// Start runs passes in the background until Stop or ctx ends, and with
// a ledger rolls refunded campaigns up beside them (RollUps).
func (w *Worker) Start(ctx context.Context) error {
	w.startM.Lock()
	defer w.startM.Unlock()
	if w.done != nil {
		return errors.New("settle: worker already started")
	}
	ctx, w.stop = context.WithCancel(ctx)
	halt, done := make(chan struct{}), make(chan struct{})
	w.halt, w.done = halt, done
	var wg sync.WaitGroup
	wg.Go(func() { w.loop(ctx, halt) })
	if _, ok := w.sink.(rollUpper); ok {
		wg.Go(func() { w.rollUpLoop(ctx, halt) })
	}
	if _, ok := w.sink.(ledger.Committer); ok && w.cfg.DrawDataRetention > 0 {
		wg.Go(func() { w.purgeLoop(ctx, halt) })
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return nil
}

// Wake ends the worker's idle pause, so that a grant just made is settled
// now rather than after up to Config.IdlePoll. It never blocks, and costs
// nothing when the worker is busy: an engine may call it on every grant.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop runs passes until ctx ends or halt closes. While passes find
// nothing to do, the pause between them doubles from Poll to IdlePoll, so
// an idle worker makes few Redis calls; work or a Wake resets it.
func (w *Worker) loop(ctx context.Context, halt <-chan struct{}) {
	backoff, idle := time.Duration(0), time.Duration(0)
	for ctx.Err() == nil {
		select {
		case <-halt:
			return
		default:
		}
		p, err := w.Pass(ctx)
		var pause time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			w.tell(&w.failures, hongbao.SettleFailed, "", 1, err)
			backoff = min(max(2*backoff, 100*time.Millisecond), w.cfg.MaxBackoff)
			pause, idle = backoff, 0
			w.log.Warn("settlement pass failed; backing off", "err", err, "backoff", backoff)
		case p.Work == 0:
			idle = min(max(2*idle, w.cfg.Poll), w.cfg.IdlePoll)
			backoff, pause = 0, idle
		default:
			backoff, idle = 0, 0
		}
		if pause == 0 {
			continue
		}
		// A wake ends an idle pause, never the backoff after a failure:
		// grants keep coming while the ledger is down.
		wake := w.wake
		if err != nil {
			wake = nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-halt:
			t.Stop()
			return
		case <-wake:
			idle = 0
		case <-t.C:
		}
		t.Stop()
	}
}

// Stop ends the background passes and waits: the pass in flight is
// cancelled (its unwritten entries stay pending and are settled again,
// idempotently).
func (w *Worker) Stop() { w.StopAfterPass(0) }

// StopAfterPass ends the background passes after the one in flight, so a
// shutdown leaves no half-done batch behind; a pass that outlasts grace is
// cancelled. It waits for the pass to return.
func (w *Worker) StopAfterPass(grace time.Duration) {
	w.startM.Lock()
	defer w.startM.Unlock()
	if w.done == nil {
		return
	}
	close(w.halt)
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-w.done:
		case <-t.C:
		}
		t.Stop()
	}
	w.stop()
	<-w.done
	w.halt, w.done = nil, nil
}

// Progress is what one pass saw and did.
type Progress struct {
	// Work counts entries handled and campaigns settled in the pass.
	Work int
	// Campaigns is the number of registered campaigns.
	Campaigns int
	// Unsettled counts entries still undelivered or pending, over all
	// campaigns, at the end of the pass.
	Unsettled int64
	// Open counts campaigns that are not settled yet.
	Open int
	// Backlog counts, per campaign still registered, its stream entries
	// still undelivered or pending at the end of the pass (red packet and
	// discount campaigns by their ids). Each entry holds one grab batch.
	Backlog map[string]int64
}

// Backlog returns what the last pass left unsettled, per campaign: stream
// entries undelivered or pending (each one grab batch). It reads no
// Redis; nil before the first pass.
func (w *Worker) Backlog() map[string]int64 {
	if m := w.backlog.Load(); m != nil {
		return *m
	}
	return nil
}

// Pass settles what it can of every registered campaign, red packet and
// discount campaigns alike, once, within Config.PassTimeout.
func (w *Worker) Pass(ctx context.Context) (Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.PassTimeout)
	defer cancel()
	ids := make([][]string, len(kinds)) // by kind
	var p Progress
	for i, k := range kinds {
		ks, err := w.store.Campaigns(ctx, k.store)
		if err != nil {
			return Progress{}, err
		}
		ids[i] = w.only(ks)
		p.Campaigns += len(ids[i])
	}
	if w.failing.Load() {
		if err := w.sink.Ping(ctx); err != nil {
			return p, fmt.Errorf("ledger unavailable: %w", err)
		}
	}
	var firstErr error
	p.Backlog = make(map[string]int64, p.Campaigns)
	defer func() {
		w.failing.Store(firstErr != nil)
		if firstErr == nil {
			w.backlog.Store(&p.Backlog)
		}
	}()
	w.forget(ids)
	for i, k := range kinds {
		for _, id := range ids[i] {
			if err := ctx.Err(); err != nil {
				// Stopped, or out of PassTimeout: a failed pass too, so the
				// next one checks the ledger before touching any stream.
				if firstErr == nil {
					firstErr = err
				}
				return p, firstErr
			}
			work, unsettled, open, err := k.pass(w, ctx, k, id)
			p.Work += work
			p.Unsettled += unsettled
			if open {
				p.Open++
				p.Backlog[id] = unsettled
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("%s %s: %w", k.store.Name, id, err)
			}
		}
	}
	return p, firstErr
}

// stream names one shard's stream of a campaign, for what the worker
// remembers of it.
type stream struct{ campaign, key string }

// streamOf is sh's stream.
func streamOf(sh shard) stream { return stream{sh.id, sh.keys.Grants} }

// forget drops what the worker remembers of campaigns that are no longer
// registered (retired, or deleted by an operator): ids are every
// registered campaign this worker settles, by kind, read at the start of a pass,
// so nothing it drops belongs to a campaign the pass will touch. A
// campaign registered again later (rebuilt) is funded and swept again,
// which the ledger makes no-ops.
func (w *Worker) forget(ids [][]string) {
	live := map[string]bool{}
	for _, kind := range ids {
		for _, id := range kind {
			live[id] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	maps.DeleteFunc(w.funded, func(id string, _ bool) bool { return !live[id] })
	maps.DeleteFunc(w.claimAt, func(s stream, _ string) bool { return !live[s.campaign] })
	maps.DeleteFunc(w.swept, func(s stream, _ int64) bool { return !live[s.campaign] })
	maps.DeleteFunc(w.foreignOf, func(id string, _ string) bool { return !live[id] })
}

// only keeps the ids of Config.Only, when it is set.
func (w *Worker) only(ids []string) []string {
	if len(w.cfg.Only) == 0 {
		return ids
	}
	keep := ids[:0]
	for _, id := range ids {
		if slices.Contains(w.cfg.Only, id) {
			keep = append(keep, id)
		}
	}
	return keep
}

// Drain runs passes until nothing is pending or undelivered in any
// campaign (closed campaigns are settled on the way). It returns early on
// ctx's end; ledger failures are retried with backoff. With a PartHolder it
// settles its parts and waits, too, for what the parts of other processes
// hold. It leaves the refunded campaigns' roll-ups to RollUps.
func (w *Worker) Drain(ctx context.Context) (Progress, error) {
	w.draining.Store(true)
	defer w.draining.Store(false)
	backoff := time.Duration(0)
	for {
		p, err := w.Pass(ctx)
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		if err == nil && p.Work == 0 && p.Unsettled == 0 {
			return p, nil
		}
		if err != nil {
			w.tell(&w.failures, hongbao.SettleFailed, "", 1, err)
			backoff = min(max(2*backoff, 100*time.Millisecond), w.cfg.MaxBackoff)
			w.log.Warn("settlement pass failed; backing off", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return p, ctx.Err()
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if p.Work == 0 {
			select {
			case <-ctx.Done():
				return p, ctx.Err()
			case <-time.After(w.cfg.Poll):
			}
		}
	}
}

// campaign settles what it can of one campaign: every shard's grants
// stream (with a PartHolder, those of its parts), and, where this worker holds
// the root's part, the transfers between shards that a dead process left
// behind, the close when the window has passed, and the refund once every
// shard is closed and drained.
func (w *Worker) campaign(ctx context.Context, k *kind, id string) (work int, unsettled int64, open bool, err error) {
	_, root := w.holds(id, 0)
	v, work, open, done, err := begin(ctx, w, id, root, k, w.store.Read, w.retire)
	if done {
		return work, 0, open, err
	}
	work, unsettled, err = w.streams(ctx, id, v.Shards, v.Root(), k)
	if err != nil || !root {
		return work, unsettled, true, err
	}
	if len(v.Shards) > 1 {
		n, err := w.store.Recover(ctx, v.Shards, staleTransfer)
		if err != nil {
			return work, unsettled, true, err
		}
		work += n
	}
	closed, changed, err := w.closeIfDue(ctx, v)
	if err != nil {
		return work, unsettled, true, err
	}
	if changed {
		work++
	}
	if closed && unsettled == 0 {
		// The stream reads above came before this close, or before a
		// grant on a shard that was still open: refund checks again,
		// after its own read of every shard closed.
		done, left, err := w.refund(ctx, k, id)
		if err != nil {
			return work, unsettled, true, err
		}
		if done {
			return work + 1, 0, false, nil
		}
		unsettled += left
	}
	return work, unsettled, true, nil
}

// begin is what a pass does first with a campaign of kind k: read reads
// it; a registered campaign whose meta is gone (expired or deleted) is
// unregistered, one still loading waits, one owned by another ledger or
// sink is left alone (own), and a settled one is retired, each by the
// worker that holds the root's part (root). When done is false the caller
// settles v; when it is true, the pass of this campaign is over with
// work, open and err.
func begin[V interface{ Root() redisstore.Snapshot }](ctx context.Context, w *Worker, id string, root bool, k *kind,
	read func(context.Context, string) (V, error), retire func(context.Context, V) error) (v V, work int, open, done bool, err error) {
	v, err = read(ctx, id)
	if errors.Is(err, redisstore.ErrNoCampaign) {
		if !root {
			return v, 0, true, true, nil
		}
		w.log.Warn("registered "+k.name+" has no meta; unregistering", k.store.Name, id)
		return v, 1, false, true, w.store.Unregister(ctx, k.store, id, nil, 0)
	}
	if err != nil {
		return v, 0, true, true, err
	}
	if v.Root().Meta["state"] == "loading" {
		return v, 0, true, true, nil
	}
	// Another deployment's campaign is none of this pass's business: not
	// open, no work, nothing unsettled (a drain would wait for it forever).
	if mine, err := w.own(ctx, id, v.Root(), w.store.NS().RootKeys(k.store, id)); err != nil || !mine {
		return v, 0, false, true, err
	}
	switch v.Root().Meta["state"] {
	case "settled":
		if !root {
			return v, 0, false, true, nil
		}
		return v, 1, false, true, retire(ctx, v)
	}
	return v, 0, true, false, nil
}

// streams settles what it can of the streams of a campaign's shards that
// this worker holds, and counts, while Drain runs, what the others still
// hold (elsewhere).
func (w *Worker) streams(ctx context.Context, id string, shards []redisstore.Keys, root redisstore.Snapshot, k *kind) (work int, unsettled int64, err error) {
	for i, keys := range shards {
		term, ok := w.holds(id, i)
		if !ok {
			u, err := w.elsewhere(ctx, keys)
			if err != nil {
				return work, 0, err
			}
			unsettled += u
			continue
		}
		n, u, err := w.streamShard(ctx, shard{id: id, keys: keys, root: root, kind: k, term: term})
		work += n
		unsettled += u
		if err != nil {
			return work, 0, err
		}
	}
	return work, unsettled, nil
}

// staleTransfer is how old a transfer between shards must be before the
// worker finishes it for the engine that started it (which normally does
// so within milliseconds): younger ones are most likely still in hand.
const staleTransfer = 10 * time.Second

// maxReadsPerStream bounds the reads of new entries a pass makes on one
// stream, so that a busy stream cannot hold up the others; the next pass
// goes on where it stopped.
const maxReadsPerStream = 16

// streamShard settles what it can of shard sh's stream.
func (w *Worker) streamShard(ctx context.Context, sh shard) (work int, unsettled int64, err error) {
	k := sh.keys
	// The batches of a campaign's shards are a shard's share of its
	// grabs in flight: reading ReadCount times the shards keeps the
	// grants per ledger transaction what they are with one shard.
	count := w.cfg.ReadCount * max(sh.root.Int("shards"), 1)
	// Our own pending entries first: after a restart, or a pass cut short
	// by a failure or a stop, they were delivered to us and may not be in
	// the ledger yet. (When there are none this is one cheap read.)
	for {
		es, err := w.store.ReadGroup(ctx, k, w.cfg.Consumer, count, true)
		if err != nil {
			return work, 0, err
		}
		if len(es) == 0 {
			break
		}
		if err := w.settleEntries(ctx, sh, es); err != nil {
			return work, 0, err
		}
		work += len(es)
	}
	// A part just taken: the previous holder's pending entries now.
	n, err := w.sweep(ctx, sh)
	work += n
	if err != nil {
		return work, 0, err
	}
	n, err = w.streamNew(ctx, sh, count)
	work += n
	if err != nil {
		return work, 0, err
	}
	n, err = w.reclaim(ctx, sh)
	work += n
	if err != nil {
		return work, 0, err
	}
	g, err := w.store.Group(ctx, k)
	if err != nil {
		return work, 0, err
	}
	if err := w.store.TrimSettled(ctx, k, g); err != nil {
		return work, 0, err
	}
	return work, g.Lag + g.Pending, nil
}

// streamNew settles new entries of shard sh's stream, count a read, until
// the stream has no more or the pass has read its share of this stream
// (the other shards and campaigns wait for it). Reads are pipelined: the
// next read runs while the ledger writes the entries of this one. An
// entry read ahead is delivered to this consumer, so if the write before
// it fails, it stays pending here and the next pass settles it first,
// as any pending entry (and a refund waits for it, as for any).
func (w *Worker) streamNew(ctx context.Context, sh shard, count int64) (work int, err error) {
	type read struct {
		es  []redisstore.Entry
		err error
	}
	readAhead := func() chan read {
		ch := make(chan read, 1)
		go func() {
			es, err := w.store.ReadGroup(ctx, sh.keys, w.cfg.Consumer, count, false)
			ch <- read{es, err}
		}()
		return ch
	}
	next := readAhead()
	// A read still in flight is waited for on the way out, so no
	// goroutine outlives the pass.
	defer func() {
		if next != nil {
			<-next
		}
	}()
	for reads := 0; reads < maxReadsPerStream; reads++ {
		r := <-next
		next = nil
		if r.err != nil {
			return work, r.err
		}
		full := int64(len(r.es)) >= count
		if full && reads+1 < maxReadsPerStream {
			next = readAhead()
		}
		if len(r.es) > 0 {
			if err := w.settleEntries(ctx, sh, r.es); err != nil {
				return work, err
			}
			work += len(r.es)
		}
		if !full {
			break
		}
	}
	return work, nil
}

// reclaim takes over and settles the entries of one shard's stream stuck
// at a consumer that died.
func (w *Worker) reclaim(ctx context.Context, sh shard) (int, error) {
	w.mu.Lock()
	start := w.claimAt[streamOf(sh)]
	w.mu.Unlock()
	if start == "" {
		start = "0-0"
	}
	next, claimed, deleted, err := w.store.AutoClaim(ctx, sh.keys, w.cfg.Consumer, w.cfg.ReclaimIdle, start, w.cfg.ReadCount)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.claimAt[streamOf(sh)] = next
	w.mu.Unlock()
	if len(deleted) > 0 {
		w.tell(&w.deleted, hongbao.SettleDeleted, sh.id, int64(len(deleted)), nil)
		w.log.Error("ALARM: pending grants entries were deleted from the stream before settling",
			"campaign", sh.id, "shard", sh.keys.Tag, "ids", deleted)
	}
	if len(claimed) == 0 {
		return 0, nil
	}
	return len(claimed), w.settleEntries(ctx, sh, claimed)
}

// closeIfDue closes a campaign whose window has passed, and finishes a
// close that stopped half way (some shards closed, some not: a process
// died inside Close). closed says whether every shard is closed now.
func (w *Worker) closeIfDue(ctx context.Context, v *redisstore.View) (closed, changed bool, err error) {
	reason, open := "", 0
	for _, snap := range v.Snaps {
		switch snap.Meta["state"] {
		case "closed", "settled":
			if reason == "" {
				reason = snap.Meta["close_reason"]
			}
		default:
			open++
		}
	}
	if open == 0 {
		return true, false, nil
	}
	root := v.Root()
	if reason == "" && root.Now < root.Int("closes_at") {
		return false, false, nil
	}
	if reason == "" {
		reason = "time"
	}
	for k := len(v.Shards) - 1; k >= 0; k-- {
		if _, _, _, err := w.store.Close(ctx, v.Shards[k], reason); err != nil {
			return false, false, err
		}
	}
	return true, true, nil
}

// Redrive puts the dead grants of campaign id back into its grants
// streams, for an operator who fixed their cause.
func (w *Worker) Redrive(ctx context.Context, id string) (int64, error) {
	v, err := w.store.Read(ctx, id)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, k := range v.Shards {
		n, err := w.store.Redrive(ctx, k)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
