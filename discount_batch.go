package hongbao

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Coalescing of discount calls. As for grabs (coalesce.go), most of what a
// script call costs Redis is per call, so concurrent requests of one
// operation on one shard share calls: while a batch is in flight, new
// arrivals queue; when it returns, everything queued (up to MaxBatch, at
// most redisstore.MaxDiscountBatch) goes out as the next batch, with no
// timer. Each operation (reserve, confirm, cancel) has its own lanes: its
// own script and its own answers.

// dop is a discount operation.
type dop uint8

const (
	opReserve dop = iota
	opConfirm
	opCancel
)

// dreq is one request: a reserve carries the order amount.
type dreq struct {
	user, order string
	cents       int64
}

type dwaiter struct {
	req   dreq
	state atomic.Int32 // queued, taken or abandoned, as for grabs
	done  chan struct{}
	res   redisstore.DiscountResult
	err   error
}

var dwaiterPool = sync.Pool{New: func() any { return &dwaiter{done: make(chan struct{}, 1)} }}

// droute is what the engine knows of a discount campaign's layout.
type droute struct {
	id      string
	shards  int
	arg     string // the scripts' first argument
	keys    []redisstore.DiscountKeys
	reserve [][]string // disc_reserve.lua's KEYS per shard
	confirm [][]string // disc_confirm.lua's KEYS per shard
	cancel  [][]string // disc_cancel.lua's KEYS per shard
}

func newDRoute(id string, shards int) *droute {
	r := &droute{id: id, shards: shards, arg: redisstore.ShardsArg(shards), keys: redisstore.DiscountLayout(id, shards)}
	r.reserve, r.confirm, r.cancel = make([][]string, shards), make([][]string, shards), make([][]string, shards)
	for k, keys := range r.keys {
		r.reserve[k], r.confirm[k], r.cancel[k] = keys.ReserveKeys(), keys.ConfirmKeys(), keys.CancelKeys()
	}
	return r
}

// views are the campaign-shard views of the route's shards.
func (r *droute) views() []redisstore.Keys { return redisstore.ShardViews(r.keys) }

// dlaneKey names a lane: one operation on one shard under one shard count.
type dlaneKey struct {
	id            string
	shards, shard int
	op            dop
}

type dlane struct {
	key      dlaneKey
	route    *droute
	mu       sync.Mutex
	queue    []*dwaiter
	inflight bool
}

// discounter owns the lanes and routes of discount campaigns.
type discounter struct {
	store    *redisstore.Store
	maxBatch int
	maxQueue int
	timeout  time.Duration

	mu     sync.Mutex
	lanes  map[dlaneKey]*dlane
	routes map[string]*droute

	batches, requests, transfers, moved atomic.Uint64
}

func newDiscounter(store *redisstore.Store, cfg Config) *discounter {
	return &discounter{
		store: store, maxBatch: min(cfg.MaxBatch, redisstore.MaxDiscountBatch), maxQueue: cfg.MaxQueue,
		timeout: cfg.BatchTimeout, lanes: map[dlaneKey]*dlane{}, routes: map[string]*droute{},
	}
}

// route returns the route the engine holds for id, guessing one shard
// for a campaign it has not seen (the script says otherwise).
func (d *discounter) route(id string) *droute {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.routeLocked(id)
}

func (d *discounter) routeLocked(id string) *droute {
	if r := d.routes[id]; r != nil {
		return r
	}
	if len(d.routes) >= maxRoutes {
		clear(d.routes)
	}
	r := newDRoute(id, 1)
	d.routes[id] = r
	return r
}

// learn records that campaign id has shards shards.
func (d *discounter) learn(id string, shards int) *droute {
	if r := d.route(id); r.shards == shards {
		return r
	}
	r := newDRoute(id, shards)
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.routes[id]; old != nil && old.shards == shards {
		return old
	}
	if len(d.routes) >= maxRoutes {
		clear(d.routes)
	}
	d.routes[id] = r
	return r
}

// forget drops route r, when a shard was not found.
func (d *discounter) forget(r *droute) {
	d.mu.Lock()
	if d.routes[r.id] == r {
		delete(d.routes, r.id)
	}
	d.mu.Unlock()
}

// do queues one request of op on its lane and waits for the answer.
func (d *discounter) do(ctx context.Context, op dop, id string, req dreq) (redisstore.DiscountResult, error) {
	w := dwaiterPool.Get().(*dwaiter)
	w.req, w.err, w.res = req, nil, redisstore.DiscountResult{}
	w.state.Store(queued)

	d.mu.Lock()
	r := d.routeLocked(id)
	k := dlaneKey{id: id, shards: r.shards, shard: redisstore.HomeShard(req.user, r.shards), op: op}
	l := d.lanes[k]
	if l == nil {
		l = &dlane{key: k, route: r}
		d.lanes[k] = l
	}
	l.mu.Lock()
	d.mu.Unlock()
	if len(l.queue) >= d.maxQueue {
		l.mu.Unlock()
		dwaiterPool.Put(w)
		return redisstore.DiscountResult{}, ErrBusy
	}
	l.queue = append(l.queue, w)
	if !l.inflight {
		l.inflight = true
		go d.run(l)
	}
	l.mu.Unlock()

	select {
	case <-w.done:
		res, err := w.res, w.err
		dwaiterPool.Put(w)
		return res, err
	case <-ctx.Done():
		if w.state.CompareAndSwap(queued, abandoned) {
			return redisstore.DiscountResult{}, ctx.Err() // never sent
		}
		return redisstore.DiscountResult{}, &redisstore.UnknownError{Err: ctx.Err()}
	}
}

// take moves up to maxBatch queued waiters of lane l into batch; done is
// true when the lane is idle and retired from the run.
func (d *discounter) take(l *dlane, batch []*dwaiter) (out []*dwaiter, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.queue {
		if len(batch) == d.maxBatch {
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

// run sends batches for lane l until its queue is empty.
func (d *discounter) run(l *dlane) {
	batch := make([]*dwaiter, 0, d.maxBatch)
	reqs := make([]dreq, 0, d.maxBatch)
	results := make([]redisstore.DiscountResult, d.maxBatch)
	for {
		var done bool
		batch, done = d.take(l, batch[:0])
		if done {
			d.retire(l)
			return
		}
		if len(batch) == 0 {
			continue
		}
		reqs = reqs[:0]
		for _, w := range batch {
			reqs = append(reqs, w.req)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
		each, err := d.exec(ctx, l, reqs, results[:len(batch)])
		cancel()
		d.batches.Add(1)
		d.requests.Add(uint64(len(batch)))
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

// retire drops an idle lane from the map, unless a request arrived.
func (d *discounter) retire(l *dlane) {
	d.mu.Lock()
	l.mu.Lock()
	if !l.inflight && len(l.queue) == 0 && d.lanes[l.key] == l {
		delete(d.lanes, l.key)
	}
	l.mu.Unlock()
	d.mu.Unlock()
}

// exec runs one batch of lane l. err fails the whole batch; each, when
// not nil, fails single requests.
func (d *discounter) exec(ctx context.Context, l *dlane, reqs []dreq, out []redisstore.DiscountResult) (each []error, err error) {
	if r := d.route(l.key.id); r != l.route {
		return d.execRouted(ctx, l.key.op, r, reqs, out, 0)
	}
	return d.execShard(ctx, l.key.op, l.route, l.key.shard, reqs, out, 0)
}

// execRouted serves requests by their users' home shards under route r,
// one script call per shard that has some.
func (d *discounter) execRouted(ctx context.Context, op dop, r *droute, reqs []dreq, out []redisstore.DiscountResult, depth int) (each []error, err error) {
	if depth > maxReroutes {
		return nil, fmt.Errorf("discount %s: its shard count keeps changing", r.id)
	}
	idx := make([][]int, r.shards)
	for i, q := range reqs {
		k := redisstore.HomeShard(q.user, r.shards)
		idx[k] = append(idx[k], i)
	}
	for k, is := range idx {
		if len(is) == 0 {
			continue
		}
		sub := make([]dreq, len(is))
		for j, i := range is {
			sub[j] = reqs[i]
		}
		subOut := make([]redisstore.DiscountResult, len(is))
		subEach, err := d.execShard(ctx, op, r, k, sub, subOut, depth)
		for j, i := range is {
			out[i] = subOut[j]
			e := err
			if e == nil && subEach != nil {
				e = subEach[j]
			}
			if e != nil {
				if each == nil {
					each = make([]error, len(reqs))
				}
				each[i] = e
			}
		}
	}
	return each, nil
}

// execShard runs op's script on shard k of route r and handles what a
// sharded campaign can answer beyond a one-shard one: a stale layout, a
// shard that does not exist, a dry shard.
func (d *discounter) execShard(ctx context.Context, op dop, r *droute, k int, reqs []dreq, out []redisstore.DiscountResult, depth int) (each []error, err error) {
	err = d.call(ctx, op, r, k, reqs, out)
	var se *redisstore.ShardsError
	if errors.As(err, &se) {
		return d.execRouted(ctx, op, d.learn(r.id, se.Shards), reqs, out, depth+1)
	}
	if err != nil || r.shards == 1 {
		return nil, err
	}
	if k > 0 && anyCode(out, redisstore.DiscNoCampaign) {
		// Gone, or made again with another layout: ask its root.
		d.forget(r)
		return d.execRouted(ctx, op, d.route(r.id), reqs, out, depth+1)
	}
	if op != opReserve || !anyCode(out, redisstore.DiscDry) {
		return nil, nil
	}
	return d.serveDry(ctx, r, k, reqs, out), nil
}

func anyCode(out []redisstore.DiscountResult, code int) bool {
	for _, o := range out {
		if o.Code == code {
			return true
		}
	}
	return false
}

// call runs op's script once on shard k of route r.
func (d *discounter) call(ctx context.Context, op dop, r *droute, k int, reqs []dreq, out []redisstore.DiscountResult) error {
	per := 2
	if op == opReserve {
		per = 3
	}
	args := make([]string, 0, 1+per*len(reqs))
	args = append(args, r.arg)
	for _, q := range reqs {
		args = append(args, q.user, q.order)
		if op == opReserve {
			args = append(args, strconv.FormatInt(q.cents, 10))
		}
	}
	switch op {
	case opReserve:
		return d.store.Reserve(ctx, r.reserve[k], args, out)
	case opConfirm:
		return d.store.Confirm(ctx, r.confirm[k], args, out)
	default:
		return d.store.Cancel(ctx, r.cancel[k], args, out)
	}
}

// DiscountStats are counters of the engine's discount calls since it
// started.
type DiscountStats struct {
	// Batches counts script calls of reserve, confirm and cancel;
	// Requests counts the requests they carried.
	Batches, Requests uint64
	// Transfers counts the transfers this engine made to refill a dry
	// shard, and Moved the amounts they moved.
	Transfers, Moved uint64
}

// DiscountStats returns the engine's discount counters.
func (e *Engine) DiscountStats() DiscountStats {
	d := e.disc
	return DiscountStats{Batches: d.batches.Load(), Requests: d.requests.Load(), Transfers: d.transfers.Load(), Moved: d.moved.Load()}
}
