package hongbao

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Coalescing. Redis runs one script at a time, and most of what a script
// call costs Redis is per call (reading the request, looking up the
// script, writing the reply, the fsync of appendfsync always), not per
// request. So concurrent requests of one operation on one shard of one
// campaign share calls: while a batch is in flight, new arrivals queue on
// the shard's lane; when it returns, everything queued (up to the batch
// size) goes out as the next batch. There is no timer: a lone request
// goes out at once, and batches grow only as fast as traffic does. A
// batcher is that mechanism for one kind of campaign: grabs of red packet
// campaigns (coalescer) and reserve, confirm and cancel of discount
// campaigns (discounter) each have one, with their own scripts (exec).

// waiter states
const (
	queued int32 = iota
	taken
	abandoned
)

// waiter is one caller's request of type Q, queued until its batch
// answers R.
type waiter[Q, R any] struct {
	req   Q
	span  trace.SpanContext // the request's wait span, when tracing
	state atomic.Int32
	done  chan struct{}
	res   R
	err   error
}

// opcode is an operation of a kind of campaign, and the index of its
// script's KEYS in route.calls: a red packet campaign has one (opGrab), a
// discount campaign three.
type opcode uint8

const opGrab opcode = 0

// laneKey names a lane: one operation on one shard under one shard count.
// A lane made under a stale count drains through its engine's routed path
// and retires.
type laneKey struct {
	id            string
	shards, shard int
	op            opcode
}

// lane is the queue of one operation on one shard of one campaign.
type lane[Q, R any] struct {
	key      laneKey
	route    *route // the layout the lane's requests were homed with
	mu       sync.Mutex
	queue    []*waiter[Q, R]
	inflight bool
}

// execFunc runs one batch of lane l: reqs holds the batch's requests, out
// gets their answers. err fails the whole batch; each, when not nil, fails
// single requests.
type execFunc[Q, R any] func(ctx context.Context, l *lane[Q, R], reqs []Q, out []R) (each []error, err error)

// batcher owns the lanes and routes of one kind of campaign.
type batcher[Q, R any] struct {
	router // its mu guards the lanes too: a request takes one lock
	counters
	maxBatch, maxQueue int
	timeout            time.Duration
	exec               execFunc[Q, R]
	tracer             trace.Tracer // nil: no spans
	ops                []string     // the name of each opcode, for spans and observers
	obs                *observers   // the engine's (observe.go)

	lanes map[laneKey]*lane[Q, R]
	pool  sync.Pool // of *waiter[Q, R]
	// life counts the lanes in flight, so that Shutdown waits for them;
	// closed (under mu) refuses new requests once Shutdown began.
	life   *life
	closed bool
}

// counters are an engine's counts of batches and refills since it started.
type counters struct {
	batches, requests atomic.Uint64
	sizes             [batchBuckets]atomic.Uint64
	// transfers made to refill a dry shard, and what they moved
	transfers, moved atomic.Uint64
}

// batchBuckets are power-of-two upper bounds 1, 2, 4, ... 4096.
const batchBuckets = 13

// borrowed counts one refill that moved moved packets or amounts (none
// when 0: nothing was transferred).
func (c *counters) borrowed(moved int) {
	if moved > 0 {
		c.transfers.Add(1)
		c.moved.Add(uint64(moved))
	}
}

// init readies b: build lays out a campaign of a number of shards, exec
// runs a batch.
func (b *batcher[Q, R]) init(cfg Config, lf *life, obs *observers, maxBatch int, build func(id string, shards int) *route, exec execFunc[Q, R]) {
	b.life = lf
	b.routes, b.build, b.obs = map[string]*route{}, build, obs
	b.maxBatch, b.maxQueue, b.timeout = maxBatch, cfg.MaxQueue, cfg.BatchTimeout
	b.exec = exec
	b.tracer = cfg.Tracer
	b.lanes = map[laneKey]*lane[Q, R]{}
	b.pool.New = func() any { return &waiter[Q, R]{done: make(chan struct{}, 1)} }
}

// do queues req, a request of op by user on campaign id, on its lane (the
// user's home shard) and waits for the answer. A full queue is ErrBusy. A
// caller whose ctx ends while the request is queued gets ctx's error (it
// was never sent); while it is in flight, an *redisstore.UnknownError:
// the script may have acted, and a retry finds what it did.
func (b *batcher[Q, R]) do(ctx context.Context, op opcode, id, user string, req Q) (R, error) {
	if b.tracer != nil {
		return b.doTraced(ctx, op, id, user, req)
	}
	return b.wait(ctx, trace.SpanContext{}, op, id, user, req)
}

// doTraced is do inside a span of the request's wait.
func (b *batcher[Q, R]) doTraced(ctx context.Context, op opcode, id, user string, req Q) (R, error) {
	ctx, span := b.tracer.Start(ctx, "hongbao.coalesce.wait", trace.WithAttributes(
		attribute.String("hongbao.campaign", id), attribute.String("hongbao.op", b.ops[op])))
	res, err := b.wait(ctx, span.SpanContext(), op, id, user, req)
	endSpan(span, err)
	return res, err
}

// endSpan ends a span, marked failed by err when not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// wait is do: sc is the request's span, when tracing.
func (b *batcher[Q, R]) wait(ctx context.Context, sc trace.SpanContext, op opcode, id, user string, req Q) (R, error) {
	var zero R
	w := b.pool.Get().(*waiter[Q, R])
	w.req, w.err, w.res, w.span = req, nil, zero, sc
	w.state.Store(queued)

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.pool.Put(w)
		return zero, ErrClosed
	}
	r := b.routeLocked(id)
	k := laneKey{id: id, shards: r.shards, op: op}
	if r.shards > 1 {
		k.shard = redisstore.HomeShard(user, r.shards)
	}
	l := b.lanes[k]
	if l == nil {
		l = &lane[Q, R]{key: k, route: r}
		b.lanes[k] = l
	}
	l.mu.Lock()
	if len(l.queue) >= b.maxQueue {
		b.mu.Unlock()
		l.mu.Unlock()
		b.pool.Put(w)
		return zero, ErrBusy
	}
	start := !l.inflight
	if start {
		// Counted under mu, so before a Shutdown that finds the
		// batcher open (close takes mu) starts to wait.
		b.life.add()
	}
	b.mu.Unlock()
	l.queue = append(l.queue, w)
	if start {
		l.inflight = true
		go b.run(l)
	}
	l.mu.Unlock()

	select {
	case <-w.done:
		res, err := w.res, w.err
		b.pool.Put(w)
		return res, err
	case <-ctx.Done():
		if w.state.CompareAndSwap(queued, abandoned) {
			// Never sent. The batch builder drops it (and recycles
			// nothing: an abandoned waiter is left to the GC).
			return zero, ctx.Err()
		}
		return zero, &redisstore.UnknownError{Err: ctx.Err()}
	}
}

// close refuses new requests (ErrClosed); the lanes in flight carry on
// until their queues are empty.
func (b *batcher[Q, R]) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

// run sends batches for lane l until its queue is empty. A batch runs on
// its own context: a caller that gives up does not cancel the others'.
func (b *batcher[Q, R]) run(l *lane[Q, R]) {
	defer b.life.done()
	batch := make([]*waiter[Q, R], 0, b.maxBatch)
	reqs := make([]Q, 0, b.maxBatch)
	results := make([]R, b.maxBatch)
	for {
		var done bool
		batch, done = b.take(l, batch[:0])
		if done {
			b.retire(l)
			return
		}
		if len(batch) == 0 {
			continue
		}
		reqs = reqs[:0]
		for _, w := range batch {
			reqs = append(reqs, w.req)
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		var span trace.Span
		if b.tracer != nil {
			ctx, span = b.batchSpan(ctx, l, batch)
		}
		obs := b.obs.load()
		var start time.Time
		if obs != nil {
			start = time.Now()
		}
		each, err := b.exec(ctx, l, reqs, results[:len(batch)])
		if span != nil {
			endSpan(span, err)
		}
		cancel()
		if obs != nil {
			ev := BatchEvent{Op: b.ops[l.key.op], Campaign: l.key.id, Size: len(batch), Duration: time.Since(start), Err: err}
			for _, x := range obs {
				x.o.ObserveBatch(ev)
			}
		}
		b.batches.Add(1)
		b.requests.Add(uint64(len(batch)))
		b.sizes[min(bits.Len(uint(len(batch)-1)), batchBuckets-1)].Add(1)
		for i, w := range batch {
			switch {
			case err != nil:
				w.err = err
			case each != nil && each[i] != nil:
				w.err = each[i]
			default:
				w.res = results[i]
			}
			w.done <- struct{}{}
		}
	}
}

// maxLinks bounds the links of a batch span to the requests it carries.
const maxLinks = 64

// batchSpan starts the span of one batch script call: a child of its
// first request's wait, linked to the others' (up to maxLinks), so that a
// request's trace shows the call that answered it.
func (b *batcher[Q, R]) batchSpan(ctx context.Context, l *lane[Q, R], batch []*waiter[Q, R]) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, min(len(batch)-1, maxLinks))
	for _, w := range batch[1:] {
		if len(links) == maxLinks {
			break
		}
		if w.span.IsValid() {
			links = append(links, trace.Link{SpanContext: w.span})
		}
	}
	ctx = trace.ContextWithSpanContext(ctx, batch[0].span)
	return b.tracer.Start(ctx, "hongbao.batch", trace.WithLinks(links...), trace.WithAttributes(
		attribute.String("hongbao.campaign", l.key.id), attribute.String("hongbao.op", b.ops[l.key.op]),
		attribute.Int("hongbao.shard", l.key.shard), attribute.Int("hongbao.batch.size", len(batch))))
}

// take moves up to maxBatch queued waiters of lane l into batch, dropping
// the abandoned ones; done is true when the lane is idle, and no longer
// in flight.
func (b *batcher[Q, R]) take(l *lane[Q, R], batch []*waiter[Q, R]) (out []*waiter[Q, R], done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.queue {
		if len(batch) == b.maxBatch {
			break
		}
		n++
		if w.state.CompareAndSwap(queued, taken) {
			batch = append(batch, w)
		}
	}
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	if len(batch) == 0 && len(l.queue) == 0 {
		l.inflight = false
		return batch, true
	}
	return batch, false
}

// retire drops an idle lane from the map, unless a request arrived
// meanwhile.
func (b *batcher[Q, R]) retire(l *lane[Q, R]) {
	b.mu.Lock()
	l.mu.Lock()
	if !l.inflight && len(l.queue) == 0 && b.lanes[l.key] == l {
		delete(b.lanes, l.key)
	}
	l.mu.Unlock()
	b.mu.Unlock()
}
