// Package leader elects one process among many that share a Redis, so that
// work meant to run once per deployment (settlement, closing campaigns on
// time, refunds) runs in one place while every process serves requests.
//
// Each process creates an Elector with the same Name and starts it. One of
// them holds a Redis lease and renews it; its OnElected runs, with a
// context that is cancelled when the lease is lost or the Elector stops.
// When the holder stops, it releases the lease and another process takes
// over at its next try (RenewEvery). When the holder dies or is cut off from
// Redis, the lease runs out and another takes over after at most TTL.
//
//	el, err := leader.New(leader.Config{
//		Redis: client,
//		OnElected: func(ctx context.Context, term leader.Term) {
//			// the work of the one leader; return soon after ctx is done
//		},
//	})
//	if err != nil { ... }
//	if err := el.Start(ctx); err != nil { ... }
//	defer el.Stop()
//
// # What a lease can promise
//
// A holder that cannot renew (Redis stalled, the network cut) reports the
// loss on its own clock: OnElected's context is cancelled, and IsLeader
// turns false, at most four fifths of TTL after the start of its last
// successful renewal, so before Redis can let the lease expire and hand it
// to another process. That holds while the work notices the cancellation
// within the remaining fifth and the process is not paused for longer (a
// stop-the-world of the whole process, a suspended VM). Work that must
// never overlap across such pauses passes the fencing token (Term.Token)
// to whatever it writes, and the receiver refuses a token not above one
// it has seen.
//
// # Fencing tokens only grow
//
// A term's token is above the token of every earlier election of the
// lease, also when Redis lost the counter the tokens are drawn from: a
// failover to a replica that missed the last elections (replication is
// asynchronous), a restart without persistence, FLUSHALL, or the counter's
// expiry 30 days after the last holding. The claim draws the largest of
// the counter plus one and the Redis clock in microseconds since the
// epoch, and writes it back to the counter (atomicop.Once, Tokens). While
// the counter lives that needs nothing of the clocks. After a loss it
// needs the clock of the Redis that draws the next token to read later
// than the clock of the Redis that drew the last lost one did at that
// draw (elections are milliseconds apart at least, so each token is a
// clock reading): the two servers' clocks must differ by less than the
// time between the last election before the loss and the first after it.
// A Sentinel failover takes down-after-milliseconds (seconds) at least,
// and NTP keeps clocks within milliseconds; a clock stepped back by more
// (a server without time sync, a VM restored from a snapshot) breaks it.
// TestTokenAboveLostIncrAfterFailover and TestTokenAboveLostCounter hold
// the guarantee.
//
// The second guard does not trust clocks: with Config.Fence the Elector
// proves each new term against a durable record of the lease's tokens
// before the work starts (package scheduler keeps one in the ledger,
// where settlement writes). A token not above the recorded one means the
// lease was handed out again under a used token; that term never works:
// the Elector releases the lease and claims it again above the recorded
// token (atomicop.Once.ClaimAbove), which also lifts the counter for every
// later claim. So a holder that cannot prove a newer token writes nothing,
// whatever the clocks. The proof costs one call per election, none per
// renewal.
//
// A build from before the clock draw takes the counter plus one. Sharing
// the counter, its tokens stay above every earlier one while the counter
// lives, and the next claim of this build goes on above them; its own
// claims after a lost counter start again from 1, so finish a rolling
// upgrade before counting on the guarantee.
//
// # How
//
// The lease is the once-only claim of package atomicop (atomicop.Once):
// the holder's mark <Prefix>{<Name>}:mark expires by itself after TTL and
// holds "c:<token>"; the token is drawn from the counter <Prefix>{<Name>}:fence
// and the Redis clock in the same script, which is where its growth comes
// from. Renewal is
// Once.Extend and release Once.Release, both checked against the token
// inside Redis: a process whose lease ran out and was taken can neither
// renew nor release the new holder's.
//
// Beside the mark, the holder writes a note, <Prefix>{<Name>}:holder,
// "<token> <Config.ID>", after each claim and renewal, with the lease's
// TTL. It decides nothing; Holder reads it with the mark, and an Elector
// waiting for the lease logs whom it waits for. A note whose token is not
// the mark's (written late, or by an earlier holder) names nobody.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/atomicop"
)

// Defaults of Config.
const (
	// DefaultName is the lease of serve's scheduler (package scheduler):
	// its keys are hb:lease:{scheduler}:mark and :fence. (Before leases
	// moved into this package it was the single key hb:lease:scheduler.)
	DefaultName = "scheduler"
	// DefaultPrefix starts the keys of every lease: the lease named n lives
	// in <DefaultPrefix>{n}:mark (its holder's claim, "c:<token>", expiring
	// with the lease) and <DefaultPrefix>{n}:fence (the counter its fencing
	// tokens are drawn from), spelled by package atomicop from the prefix
	// and the name.
	DefaultPrefix = "hb:lease:"
	// DefaultTTL is the lifetime of a lease that is not renewed.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest TTL Validate accepts: shorter leases would be
	// lost to an ordinary round trip or a collector pause.
	MinTTL = 50 * time.Millisecond
)

// fenceTTL is how long the token counter of a lease outlives the last
// claim or renewal. A lease nobody held for this long draws its next
// token from the Redis clock, still above the earlier ones (see the
// package doc).
const fenceTTL = 30 * 24 * time.Hour

// releaseTimeout bounds the release of the lease when an Elector stops.
const releaseTimeout = 2 * time.Second

var (
	// ErrConfig means a Config that Validate refuses.
	ErrConfig = errors.New("leader: invalid config")
	// ErrStarted means Start was called on an Elector already started.
	ErrStarted = errors.New("leader: already started")
)

// Config configures an Elector. The zero value of every field but Redis
// means its default.
type Config struct {
	// Redis is the client of the Redis that holds the lease. Required.
	Redis rueidis.Client
	// Name names the lease: the processes that use the same Name and
	// Prefix on one Redis elect one leader. It must not contain braces.
	// Default: DefaultName ("scheduler").
	Name string
	// Prefix starts the lease's keys, <Prefix>{<Name>}:mark and
	// <Prefix>{<Name>}:fence. It must not contain braces. Default:
	// DefaultPrefix ("hb:lease:").
	Prefix string
	// TTL is the lifetime of the lease in Redis without a renewal: how
	// long after a holder dies (or is cut off) another process takes over.
	// Whole milliseconds, at least MinTTL. Default: DefaultTTL (10s).
	TTL time.Duration
	// RenewEvery is how often the holder renews the lease, and how often
	// the others try to take it. At most TTL/2, so that a renewal that
	// fails once is tried again before the holder gives up. Default: TTL/3.
	RenewEvery time.Duration
	// Logger receives the elections, the losses, whom this process waits
	// for, and the Redis errors. Default: slog.Default().
	Logger *slog.Logger
	// ID names this process to the others: the holder's note says it
	// (Holder), and a process waiting for the lease logs it. At most
	// MaxIDLen bytes. Default: the host name and the process id,
	// "host:pid".
	ID string
	// Fence, if not nil, proves each new term against a durable record of
	// the lease's tokens before its work starts (package scheduler records
	// them in the ledger). When this process takes the lease under a token
	// Fence has not accepted yet, the Elector calls it with the term and
	// OnElected's context, and:
	//   - nil means the record took the token as the largest it holds:
	//     OnElected runs and IsLeader turns true;
	//   - a *StaleTokenError (ErrStaleToken) means the record holds a
	//     token as large: the lease was handed out again under a token
	//     already used. The work does not run; after RenewEvery the
	//     Elector releases the lease and claims it again above the
	//     recorded token (atomicop.Once.ClaimAbove);
	//   - any other error (the record out of reach) means the token is not
	//     proven yet: the work does not run, and Fence is called again
	//     every RenewEvery while the lease is held.
	// It runs once per term: a term taken back under the same token (see
	// Term.Token) needs no new proof. Default nil: terms start at once,
	// and tokens rest on the Redis clock alone (see the package doc).
	Fence func(ctx context.Context, t Term) error
	// OnElected runs the leader's work, in a goroutine of its own, each
	// time this process takes the lease. Its context is cancelled when the
	// lease is lost or the Elector stops; it should return soon after,
	// because the Elector waits for it before it tries again or stops, so
	// two of its runs never overlap in one process. Optional: IsLeader
	// also tells.
	OnElected func(ctx context.Context, term Term)
}

// withDefaults returns the configuration with every zero field set to its
// default.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.TTL / 3
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = host + ":" + strconv.Itoa(os.Getpid())
	}
	return c
}

// MaxIDLen bounds Config.ID, in bytes.
const MaxIDLen = 256

// Validate reports whether the configuration, with its defaults filled in,
// can be used.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Redis == nil:
		return fmt.Errorf("%w: Redis is required", ErrConfig)
	case strings.ContainsAny(c.Name, "{}"):
		return fmt.Errorf("%w: Name %q must not contain braces", ErrConfig, c.Name)
	case strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("%w: Prefix %q must not contain braces", ErrConfig, c.Prefix)
	case c.TTL < MinTTL:
		return fmt.Errorf("%w: TTL %v, want at least %v", ErrConfig, c.TTL, MinTTL)
	case c.TTL%time.Millisecond != 0:
		return fmt.Errorf("%w: TTL %v, want whole milliseconds", ErrConfig, c.TTL)
	case c.RenewEvery < time.Millisecond || c.RenewEvery > c.TTL/2:
		return fmt.Errorf("%w: RenewEvery %v, want 1ms..TTL/2 (%v)", ErrConfig, c.RenewEvery, c.TTL/2)
	case len(c.ID) > MaxIDLen:
		return fmt.Errorf("%w: ID of %d bytes, want at most %d", ErrConfig, len(c.ID), MaxIDLen)
	}
	return nil
}

// ErrStaleToken means a fencing token not above one already recorded
// (Config.Fence): the lease was handed out again under a token used
// before. The typed *StaleTokenError unwraps to it.
var ErrStaleToken = errors.New("leader: fencing token not above the one recorded")

// StaleTokenError is what Config.Fence returns for a token that its
// record refuses: Recorded is the token the record holds, at least Token.
type StaleTokenError struct {
	Token    int64
	Recorded int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("%v: token %d, recorded %d", ErrStaleToken, e.Token, e.Recorded)
}

// Unwrap makes errors.Is(err, ErrStaleToken) hold.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// Term is one holding of the lease by one process.
type Term struct {
	// Token is the fencing token of the holding: it grows with every
	// election of the lease, across lost counters as the package doc
	// says, so a receiver that remembers the largest token it has seen can
	// refuse the writes of an earlier holder. It is about the Redis clock
	// in microseconds since the epoch (16 digits): compare tokens, never
	// count with them. A holder that loses the lease and takes it back
	// before anyone else held it keeps its token.
	Token int64
	// Since is when this process took the lease, on its own clock.
	Since time.Time
}

// Elector takes and holds one lease for as long as it runs. Use New, then
// Start and Stop. Its methods are safe for concurrent use.
type Elector struct {
	cfg  Config
	once *atomicop.Once
	log  *slog.Logger
	// mark and note are the keys of the holder's mark (atomicop's) and of
	// its note (Holder).
	mark, note string
	notes      sync.WaitGroup // notes being written

	mu      sync.Mutex
	leading bool
	until   time.Time // while leading: when this process stops believing it
	token   int64     // while leading: the term's token
	proven  int64     // the last token Config.Fence accepted
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns an Elector for cfg.
func New(cfg Config) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	once, err := atomicop.NewOnce(cfg.Redis, &atomicop.OnceConfig{Prefix: cfg.Prefix, FenceTTL: fenceTTL})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	keys := cfg.Prefix + "{" + cfg.Name + "}:"
	return &Elector{
		cfg: cfg, once: once, mark: keys + "mark", note: keys + "holder",
		log: cfg.Logger.With("component", "leader", "lease", cfg.Name),
	}, nil
}

// Start begins taking and renewing the lease in the background, until
// Stop is called or ctx ends. It returns ErrStarted when called twice.
func (e *Elector) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return ErrStarted
	}
	e.started = true
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	l := newLoop(e)
	go func() {
		defer close(e.done)
		l.run(ctx)
	}()
	return nil
}

// Stop ends the election and waits: OnElected's context is cancelled, the
// Elector waits for it to return and for a Redis call in flight (each
// is bounded by the longer of RenewEvery and TTL/5), then
// releases the lease if it holds it, so another process takes over at its
// next try instead of after the TTL. Stop before Start does nothing.
func (e *Elector) Stop() {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	e.notes.Wait()
}

// IsLeader reports whether this process holds the lease now, as far as it
// can know: it turns false when a renewal says the lease is another's, and
// at the latest four fifths of TTL after the start of the last successful
// renewal, before Redis can give the lease to another process.
//
// With Config.Fence, it is true only once Fence accepted the term's token.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading && time.Now().Before(e.until) && (e.cfg.Fence == nil || e.proven == e.token)
}

// setLeading records the state IsLeader reports.
func (e *Elector) setLeading(leading bool, until time.Time, token int64) {
	e.mu.Lock()
	e.leading, e.until, e.token = leading, until, token
	e.mu.Unlock()
}

// setProven records the token Config.Fence accepted.
func (e *Elector) setProven(token int64) {
	e.mu.Lock()
	e.proven = token
	e.mu.Unlock()
}

// isProven says whether Config.Fence accepted token already.
func (e *Elector) isProven(token int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg.Fence == nil || e.proven == token
}
