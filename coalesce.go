package hongbao

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Coalescing. Redis runs one script at a time, and most of what a script
// call costs Redis is per call (reading the request, looking up the
// script, writing the reply, the fsync of appendfsync always), not per
// user. So concurrent grabs of one campaign share calls: while a batch is
// in flight, new arrivals queue; when it returns, everything queued (up to
// MaxBatch) goes out as the next batch. There is no timer: a lone grab goes
// out at once, and batches grow only as fast as traffic does.

// waiter states
const (
	queued int32 = iota
	taken
	abandoned
)

type waiter struct {
	user  string
	state atomic.Int32
	done  chan struct{}
	res   redisstore.GrabResult
	err   error
}

// lane is the queue of one shard of one campaign.
type lane struct {
	key      laneKey
	route    *route // the layout the lane's users were homed with
	keys     []string
	mu       sync.Mutex
	queue    []*waiter
	inflight bool
}

// laneKey names a lane: a shard under one shard count. A lane made under
// a stale count drains through the slow path and retires.
type laneKey struct {
	id            string
	shards, shard int
}

// coalescer owns the lanes of all campaigns.
type coalescer struct {
	store    *redisstore.Store
	maxBatch int
	maxQueue int
	timeout  time.Duration

	mu     sync.Mutex
	lanes  map[laneKey]*lane
	routes map[string]*route

	batches   atomic.Uint64
	grabs     atomic.Uint64
	sizes     [batchBuckets]atomic.Uint64
	transfers atomic.Uint64
	moved     atomic.Uint64
}

// batchBuckets are power-of-two upper bounds 1, 2, 4, ... 4096.
const batchBuckets = 13

var waiterPool = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// grab queues user on campaign id's lane and waits for the answer.
func (c *coalescer) grab(ctx context.Context, id, user string) (redisstore.GrabResult, error) {
	w := waiterPool.Get().(*waiter)
	w.user, w.err, w.res = user, nil, redisstore.GrabResult{}
	w.state.Store(queued)

	c.mu.Lock()
	r := c.routes[id]
	if r == nil {
		r = c.guess(id)
	}
	k := laneKey{id: id, shards: r.shards}
	if r.shards > 1 {
		k.shard = redisstore.HomeShard(user, r.shards)
	}
	l := c.lanes[k]
	if l == nil {
		l = &lane{key: k, route: r, keys: r.grab[k.shard]}
		c.lanes[k] = l
	}
	l.mu.Lock()
	c.mu.Unlock()
	if len(l.queue) >= c.maxQueue {
		l.mu.Unlock()
		waiterPool.Put(w)
		return redisstore.GrabResult{}, ErrBusy
	}
	l.queue = append(l.queue, w)
	if !l.inflight {
		l.inflight = true
		go c.run(l)
	}
	l.mu.Unlock()

	select {
	case <-w.done:
		res, err := w.res, w.err
		waiterPool.Put(w)
		return res, err
	case <-ctx.Done():
		if w.state.CompareAndSwap(queued, abandoned) {
			// Never sent: nothing was granted. The batch builder drops it
			// (and recycles nothing: an abandoned waiter is left to the GC).
			return redisstore.GrabResult{}, ctx.Err()
		}
		// In flight: the script may grant a packet, which stays the user's;
		// a retry returns it.
		return redisstore.GrabResult{}, &redisstore.UnknownError{Err: ctx.Err()}
	}
}

// run sends batches for lane l until its queue is empty.
func (c *coalescer) run(l *lane) {
	// args is grab.lua's ARGV: the shard count, then the users.
	args := make([]string, 0, c.maxBatch+1)
	batch := make([]*waiter, 0, c.maxBatch)
	results := make([]redisstore.GrabResult, c.maxBatch)
	for {
		args, batch = append(args[:0], l.route.arg), batch[:0]
		l.mu.Lock()
		n := 0
		for _, w := range l.queue {
			if len(batch) == c.maxBatch {
				break
			}
			n++
			if w.state.CompareAndSwap(queued, taken) {
				batch = append(batch, w)
				args = append(args, w.user)
			}
		}
		rest := copy(l.queue, l.queue[n:])
		clear(l.queue[rest:])
		l.queue = l.queue[:rest]
		if len(batch) == 0 {
			if len(l.queue) == 0 {
				l.inflight = false
				l.mu.Unlock()
				c.retire(l)
				return
			}
			l.mu.Unlock()
			continue
		}
		l.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		each, err := c.exec(ctx, l, args, results[:len(batch)])
		cancel()
		c.batches.Add(1)
		c.grabs.Add(uint64(len(batch)))
		c.sizes[min(bits.Len(uint(len(batch)-1)), batchBuckets-1)].Add(1)
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

// exec runs one batch of lane l: args[0] is the shard count, args[1:]
// the users, out their answers. err fails the whole batch; each, when
// not nil, fails single users (those a refill could not serve).
func (c *coalescer) exec(ctx context.Context, l *lane, args []string, out []redisstore.GrabResult) (each []error, err error) {
	if l.key.shards == 1 {
		// The hot path of every one-shard campaign: one script call.
		err = c.store.Grab(ctx, l.keys, args, out)
		var se *redisstore.ShardsError
		if !errors.As(err, &se) {
			return nil, err
		}
		// The campaign has shards: learn the layout, route each user home.
		return c.execRouted(ctx, c.learn(l.key.id, se.Shards), args[1:], out, 0)
	}
	if r := c.current(l.key.id); r != l.route {
		return c.execRouted(ctx, r, args[1:], out, 0)
	}
	return c.execShard(ctx, l.route, l.key.shard, args, out, 0)
}

// retire drops an idle lane from the map, unless a grab arrived meanwhile.
func (c *coalescer) retire(l *lane) {
	c.mu.Lock()
	l.mu.Lock()
	if !l.inflight && len(l.queue) == 0 && c.lanes[l.key] == l {
		delete(c.lanes, l.key)
	}
	l.mu.Unlock()
	c.mu.Unlock()
}

// Stats are counters of the engine's batching since it started.
type Stats struct {
	// Batches counts grab script calls; Grabs counts the grabs they
	// carried.
	Batches, Grabs uint64
	// Transfers counts the transfers this engine made to refill a dry
	// shard, and Moved the packets they moved.
	Transfers, Moved uint64
	// BatchSizes is the distribution of batch sizes: bucket i counts
	// batches of more than Max of bucket i-1 and at most Max users.
	BatchSizes []BatchBucket
}

// BatchBucket is one bar of the batch size distribution.
type BatchBucket struct {
	Max   int
	Count uint64
}

func (c *coalescer) stats() Stats {
	s := Stats{Batches: c.batches.Load(), Grabs: c.grabs.Load(), Transfers: c.transfers.Load(), Moved: c.moved.Load()}
	for i := range c.sizes {
		s.BatchSizes = append(s.BatchSizes, BatchBucket{Max: 1 << i, Count: c.sizes[i].Load()})
	}
	return s
}

// String draws the distribution in one line, for reports.
func (s Stats) String() string {
	out := fmt.Sprintf("%d grabs in %d batches", s.Grabs, s.Batches)
	for _, b := range s.BatchSizes {
		if b.Count > 0 {
			out += fmt.Sprintf(" | <=%d: %d", b.Max, b.Count)
		}
	}
	return out
}
