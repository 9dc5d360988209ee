package hongbao

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Shutdown stops the engine: it takes no new work, waits until the work
// it runs beyond its callers' calls is done, then closes its use of
// Redis. Once it began, grabs and discount calls fail with ErrClosed
// before they queue and creates before they read the ledger; once it
// returned nil, every other call fails with ErrClosed before it reaches
// Redis.
//
// The work it waits for is the engine's own: the batches of the lanes in
// flight (grabs and discount calls queued before it began are sent and
// answered; a batch runs on its own deadline, Config.BatchTimeout) and
// the blocks of the pop frontier being opened ahead of need, each a
// ledger write (frontier.go). Once it returns nil the engine makes no
// further call to Config.Packets or to Config.Redis, so the host may
// close them. It does not wait for calls the host itself has in flight
// (a Create, a Status): return from them first.
//
// When ctx ends first it returns ctx's error: new work is refused all
// the same, and the work in flight goes on to its end (at most a batch's
// deadline, or an open's 10s); call Shutdown again to wait for it. It is
// safe to call more than once and concurrently.
//
// A host stops in this order: stop taking requests (http.Server's
// Shutdown, which waits for the handlers), eng.Shutdown(ctx), stop the
// settlement scheduler (scheduler.Scheduler's Stop), close the ledger,
// close the Redis client. Closing the ledger before Shutdown returns can
// fail an open ahead of need half way (recorded, not opened: harmless,
// the next open records it again) and the grabs that waited for it.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.co.close()
	e.discounts.close()
	select {
	case <-e.life.close():
		e.store.Shut()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hongbao: shutdown: work still in flight: %w", ctx.Err())
	}
}

// life counts the work an engine runs beyond its callers' calls (lanes
// in flight, opens ahead of need) and says when Shutdown began.
type life struct {
	mu      sync.Mutex
	closed  bool
	n       int
	idle    chan struct{} // closed once closed and n is 0
	idleSet bool
}

func newLife() *life { return &life{idle: make(chan struct{})} }

// add counts work that starts: only from work counted already, or under
// a lock that Shutdown takes before it waits (a batcher's), so never
// after the count reached zero in a closed life.
func (l *life) add() {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
}

// done ends work that add counted.
func (l *life) done() {
	l.mu.Lock()
	l.n--
	l.settle()
	l.mu.Unlock()
}

// close marks the life closed and returns a channel closed when no
// counted work is left.
func (l *life) close() <-chan struct{} {
	l.mu.Lock()
	l.closed = true
	l.settle()
	l.mu.Unlock()
	return l.idle
}

// settle closes idle once closed with nothing counted. Called with mu
// held.
func (l *life) settle() {
	if l.closed && l.n == 0 && !l.idleSet {
		l.idleSet = true
		close(l.idle)
	}
}

// closing reports whether Shutdown began.
func (l *life) closing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// closedTerms is a TermsRecorder that refuses every call once Shutdown
// began, so that a create after it reads and writes no terms.
type closedTerms struct {
	TermsRecorder
	life *life
}

func (t closedTerms) WriteTerms(ctx context.Context, campaign string, terms ledger.Terms) error {
	if t.life.closing() {
		return errShutDown
	}
	return t.TermsRecorder.WriteTerms(ctx, campaign, terms)
}

func (t closedTerms) Terms(ctx context.Context, campaign string) (ledger.Terms, error) {
	if t.life.closing() {
		return ledger.Terms{}, errShutDown
	}
	return t.TermsRecorder.Terms(ctx, campaign)
}

// errShutDown is ErrClosed as the cause of a failure that a message of
// this package wraps with fmt (without the prefix there).
var errShutDown error = shutDownError{}

type shutDownError struct{}

func (shutDownError) Error() string        { return "the engine is shut down" }
func (shutDownError) Is(target error) bool { return target == ErrClosed }

// plainStoreErr prefixes err, from a store call that needs no other
// mapping (a list, a counter), and files a refusal by a closed client
// under ErrClosed.
func plainStoreErr(err error) error {
	if errors.Is(err, redisstore.ErrClientClosed) {
		return &kindError{kind: ErrClosed, cause: err}
	}
	return fmt.Errorf("hongbao: %w", err)
}
