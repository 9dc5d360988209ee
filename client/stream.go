package client

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/hongbao/hongbao/client/hongbaov1"
)

// A Gateway's stream mode (GatewayOptions.Stream): one GrabStream per
// campaign, open while its callers wait and StreamIdle after. Each Grab
// is sent as it arrives, under a ref of its own, and its caller is
// answered by the result that echoes the ref. The grabs that arrive
// while a message is being sent go together in the next one; at most
// MaxBatch grabs are in flight (sent, unanswered), as the service holds
// at most 1000 of a stream.
//
// When the stream breaks (the connection, a deploy ending it), every
// grab sent and unanswered goes again on a new stream, as a batch is
// sent again: a grab is idempotent per user, and a grant made by the
// lost one answers already_granted with the same packet. A grab counts
// an attempt each time it is sent, and is retried within Options.Retry
// as a single grab is: after a broken stream, and after a result whose
// error asks a retry (busy, outcome_unknown, unavailable, not_ready,
// internal).

// errStreamEnded is a stream that the service ended while grabs of it
// waited for their results.
var errStreamEnded = errors.New("the stream ended before every result came")

// ErrGatewayClosed is the answer of a Gateway's Grab after Close.
var ErrGatewayClosed = errors.New("hongbao: gateway closed")

// streamLane is one campaign's stream and its callers. Its fields are
// guarded by Gateway.mu, but for wake.
type streamLane struct {
	g        *Gateway
	campaign string
	base     context.Context // the first caller's values, for Propagate

	outbox  []*swaiter               // to send, in order; gone ones are skipped
	queued  int                      // in outbox and not gone
	pending map[uint64]*swaiter      // sent on the current stream, unanswered
	delayed map[*swaiter]*time.Timer // waiting to be sent again
	nextRef uint64
	broken  error     // the current stream's failure, set by its reader
	active  time.Time // when a grab was last sent or answered
	heard   bool      // the current stream answered something
	wake    chan struct{}
}

// swaiter states, beside queued, sent, gone and done.
const delayed = done + 1 // waiting for its retry's time

// swaiter is one Grab on a stream.
type swaiter struct {
	ctx    context.Context
	user   string
	state  int
	sends  int
	sentAt time.Time
	res    chan gatewayResult // buffered: answered once, never blocks
}

func (l *streamLane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// answer ends w's wait with r. Gateway.mu is held.
func (l *streamLane) answer(w *swaiter, r gatewayResult) {
	w.state = done
	w.res <- r
}

// streamGrab is Grab in stream mode.
func (g *Gateway) streamGrab(ctx context.Context, campaign, user string) (*Grab, error) {
	w := &swaiter{ctx: ctx, user: user, res: make(chan gatewayResult, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrGatewayClosed
	}
	l := g.streams[campaign]
	if l == nil {
		l = &streamLane{g: g, campaign: campaign, base: context.WithoutCancel(ctx), pending: map[uint64]*swaiter{},
			delayed: map[*swaiter]*time.Timer{}, wake: make(chan struct{}, 1)}
		g.streams[campaign] = l
		g.wg.Add(1)
		go g.run(l)
	}
	if l.queued >= g.o.MaxQueue {
		g.mu.Unlock()
		return nil, ErrGatewayFull
	}
	l.outbox = append(l.outbox, w)
	l.queued++
	g.mu.Unlock()
	l.poke()

	select {
	case r := <-w.res:
		return r.grab, r.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	switch w.state {
	case queued:
		w.state = gone
		l.queued--
		g.mu.Unlock()
		l.poke()
		if w.sends == 0 {
			return nil, ctx.Err() // never sent
		}
		return nil, &lostError{err: ctx.Err()}
	case delayed:
		l.delayed[w].Stop()
		delete(l.delayed, w)
		w.state = gone
		g.mu.Unlock()
		l.poke()
		return nil, &lostError{err: ctx.Err()}
	case sent:
		// Its result is dropped when it comes; the stream goes on.
		w.state = gone
		g.mu.Unlock()
		return nil, &lostError{err: ctx.Err()}
	}
	g.mu.Unlock()
	r := <-w.res // answered as ctx ended
	return r.grab, r.err
}

// run keeps campaign's stream: it opens one, sends the grabs, and opens
// another when it breaks, until no caller waits and the stream was idle
// for StreamIdle (or the Gateway closes).
func (g *Gateway) run(l *streamLane) {
	defer g.wg.Done()
	failures := 0
	for {
		ctx, cancel := context.WithCancel(l.base)
		st := g.c.rpc.streams.GrabStream(ctx)
		g.c.header(ctx, st.RequestHeader())
		read := make(chan struct{})
		go func() {
			defer close(read)
			l.read(st, cancel)
		}()
		err := l.pump(st, cancel)
		if err == nil {
			// Idle: nothing waits. The service ends the stream once it
			// read the end of ours.
			_ = st.CloseRequest()
			<-read
			_ = st.CloseResponse()
			cancel()
			return
		}
		cancel()
		<-read
		_ = st.CloseResponse()
		g.mu.Lock()
		if l.heard {
			failures = 0
		}
		failures++
		wait, stop := l.broke(err, failures)
		g.mu.Unlock()
		if stop {
			return
		}
		t := time.NewTimer(wait)
		<-t.C
	}
}

// stream is the part of a GrabStream the lane uses.
type stream interface {
	Send(*hongbaov1.GrabStreamRequest) error
	Receive() (*hongbaov1.GrabStreamResponse, error)
}

// pump sends the queued grabs on st until it breaks (its error) or the
// lane is dropped, idle (nil).
func (l *streamLane) pump(st stream, cancel context.CancelFunc) error {
	g := l.g
	first := true
	for {
		grabs, err := l.next()
		if err != nil || grabs == nil {
			return err
		}
		msg := &hongbaov1.GrabStreamRequest{Grabs: grabs}
		if first {
			msg.CampaignId, first = l.campaign, false
		}
		if err := st.Send(msg); err != nil && !errors.Is(err, io.EOF) {
			// io.EOF: the stream ended, and its reader hears why.
			g.mu.Lock()
			if l.broken == nil {
				l.broken = err
			}
			g.mu.Unlock()
			cancel()
		}
	}
}

// next waits for grabs to send and takes them, as many as there is room
// in flight; the stream's failure; or nil, nil once the lane is idle and
// dropped.
func (l *streamLane) next() ([]*hongbaov1.StreamGrab, error) {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		if l.broken != nil {
			return nil, l.broken
		}
		if room := g.o.MaxBatch - len(l.pending); room > 0 && l.queued > 0 {
			var out []*hongbaov1.StreamGrab
			now := time.Now()
			n := 0
			for n < len(l.outbox) && len(out) < room {
				w := l.outbox[n]
				n++
				if w.state != queued {
					continue
				}
				l.nextRef++
				l.pending[l.nextRef] = w
				w.state, w.sentAt = sent, now
				w.sends++
				out = append(out, &hongbaov1.StreamGrab{UserId: w.user, Ref: l.nextRef})
			}
			clear(l.outbox[:n])
			l.outbox = l.outbox[n:]
			l.queued -= len(out)
			l.active = now
			return out, nil
		}
		var idle *time.Timer
		var fired <-chan time.Time
		if l.queued == 0 && len(l.pending) == 0 && len(l.delayed) == 0 {
			left := g.o.StreamIdle - time.Since(l.active)
			if g.closed || left <= 0 {
				l.drop()
				return nil, nil
			}
			idle = time.NewTimer(left)
			fired = idle.C
		}
		g.mu.Unlock()
		select {
		case <-l.wake:
		case <-fired:
		}
		if idle != nil {
			idle.Stop()
		}
		g.mu.Lock()
	}
}

// drop takes the lane out of the Gateway: a Grab that comes later opens
// a new one. Gateway.mu is held.
func (l *streamLane) drop() {
	if l.g.streams[l.campaign] == l {
		delete(l.g.streams, l.campaign)
	}
	l.outbox = nil
}

// read answers the callers from st's results until it ends, records why
// it ended, and cancels the stream.
func (l *streamLane) read(st stream, cancel context.CancelFunc) {
	g := l.g
	for {
		msg, err := st.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errStreamEnded
			}
			g.mu.Lock()
			if l.broken == nil {
				l.broken = err
			}
			g.mu.Unlock()
			cancel() // a Send blocked on the dead stream returns
			l.poke()
			return
		}
		now := time.Now()
		var oldest time.Time
		g.mu.Lock()
		for _, r := range msg.GetResults() {
			w := l.pending[r.GetRef()]
			if w == nil {
				continue // not this stream's: the service answers each ref once
			}
			delete(l.pending, r.GetRef())
			if oldest.IsZero() || w.sentAt.Before(oldest) {
				oldest = w.sentAt
			}
			l.settle(w, r)
		}
		l.heard, l.active = true, now
		g.mu.Unlock()
		l.poke()
		if g.o.Observe != nil && !oldest.IsZero() {
			g.o.Observe(GatewayBatch{Campaign: l.campaign, Users: len(msg.GetResults()), Elapsed: now.Sub(oldest)})
		}
	}
}

// retried are the codes of a result that a stream sends again: the
// grab's batch failed, and the service may have done nothing or may
// have granted (a retry answers already_granted).
var retried = map[string]bool{"busy": true, "outcome_unknown": true, "unavailable": true, "not_ready": true, "internal": true}

// settle answers w with its result r, or sends w again when r's error
// asks it and the retry policy allows. Gateway.mu is held.
func (l *streamLane) settle(w *swaiter, r *hongbaov1.GrabResult) {
	if w.state == gone {
		return
	}
	res := resultOf(l.campaign, r)
	var e *Error
	if errors.As(res.err, &e) && retried[e.Code] {
		if wait, ok := l.again(w, e.RetryAfter); ok {
			w.state = delayed
			l.delayed[w] = time.AfterFunc(wait, func() { l.requeue(w) })
			return
		}
	}
	l.answer(w, res)
}

// again says whether w may be sent once more, after how long: asked
// (a Retry-After), else the backoff of its attempts.
func (l *streamLane) again(w *swaiter, asked time.Duration) (time.Duration, bool) {
	c := l.g.c
	if w.sends >= c.retry.MaxAttempts || w.ctx.Err() != nil || asked > c.retry.MaxRetryAfter {
		return 0, false
	}
	wait := c.backoff(w.sends)
	if asked > 0 {
		wait = asked
	}
	if dl, ok := w.ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	return wait, true
}

// requeue puts a delayed grab back in the outbox.
func (l *streamLane) requeue(w *swaiter) {
	l.g.mu.Lock()
	delete(l.delayed, w)
	if w.state == delayed {
		w.state = queued
		l.outbox = append(l.outbox, w)
		l.queued++
	}
	l.g.mu.Unlock()
	l.poke()
}

// broke handles the failure of the stream: the grabs it left unanswered
// go first in the outbox for the next stream, those past the retry
// policy are answered the failure, and every waiting caller is when the
// failure is final (a refused key). It answers how long to wait before
// the next stream, or stop when nobody waits any more (the lane is then
// dropped). Gateway.mu is held.
func (l *streamLane) broke(cause error, failures int) (time.Duration, bool) {
	g, c := l.g, l.g.c
	err := rpcError(context.Background(), cause)
	if errors.Is(cause, errStreamEnded) {
		err = &lostError{err: cause}
	}
	// not_ready: the instance stops (a deploy); the next stream goes to
	// another.
	final := classify(err) == final && !errors.Is(err, ErrNotReady)
	wait := c.backoff(failures)
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		if e.RetryAfter > c.retry.MaxRetryAfter {
			final = true
		}
		wait = e.RetryAfter
	}
	refs := make([]uint64, 0, len(l.pending))
	for ref := range l.pending {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	var again []*swaiter
	for _, ref := range refs {
		w := l.pending[ref]
		delete(l.pending, ref)
		if w.state == gone {
			continue
		}
		if final {
			l.answer(w, gatewayResult{err: err})
			continue
		}
		if _, ok := l.again(w, wait); !ok {
			l.answer(w, gatewayResult{err: err})
			continue
		}
		w.state = queued
		again = append(again, w)
	}
	if g.o.Observe != nil && len(refs) > 0 {
		g.o.Observe(GatewayBatch{Campaign: l.campaign, Users: len(refs), Err: err})
	}
	if final {
		for _, w := range l.outbox {
			if w.state == queued {
				l.answer(w, gatewayResult{err: err})
			}
		}
		l.outbox, l.queued = nil, 0
	}
	l.outbox = append(again, l.outbox...)
	l.queued += len(again)
	l.broken, l.heard = nil, false
	if l.queued == 0 && len(l.delayed) == 0 {
		l.drop()
		return 0, true
	}
	return wait, false
}
