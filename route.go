package hongbao

import (
	"errors"
	"sync"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// route is what an engine knows of a campaign's layout: its shard count
// and every shard's keys, built once per layout.
type route struct {
	id     string
	shards int
	keys   []redisstore.Keys // per shard (a discount shard's campaign view)
	calls  [][][]string      // per opcode, per shard: the script's KEYS
}

// newRoute lays out a red packet campaign of namespace ns: grab.lua is its
// one script.
func newRoute(ns redisstore.Namespace, id string, shards int) *route {
	r := &route{id: id, shards: shards, keys: ns.Layout(id, shards)}
	grab := make([][]string, shards)
	for k, keys := range r.keys {
		grab[k] = redisstore.GrabKeys(keys)
	}
	r.calls = [][][]string{opGrab: grab}
	return r
}

// maxRoutes bounds a route cache: requests for made-up campaign ids fill
// it with one-shard guesses, and a full cache starts over.
const maxRoutes = 4096

// router caches the routes of one kind of campaign.
type router struct {
	mu     sync.Mutex // guards routes, and the lanes of the batcher that holds the router
	routes map[string]*route
	build  func(id string, shards int) *route
}

// routeLocked returns the route held for id, guessing one shard for a
// campaign not seen yet, until a script says otherwise. Called with mu
// held.
func (rt *router) routeLocked(id string) *route {
	if r := rt.routes[id]; r != nil {
		return r
	}
	return rt.putLocked(rt.build(id, 1))
}

// putLocked caches r. Called with mu held.
func (rt *router) putLocked(r *route) *route {
	if len(rt.routes) >= maxRoutes {
		clear(rt.routes)
	}
	rt.routes[r.id] = r
	return r
}

// current is the route now held for id.
func (rt *router) current(id string) *route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.routeLocked(id)
}

// learn records that campaign id has shards shards. The layout is built
// outside the lock: for many shards it takes a moment.
func (rt *router) learn(id string, shards int) *route {
	if r := rt.current(id); r.shards == shards {
		return r
	}
	r := rt.build(id, shards)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if old := rt.routes[id]; old != nil && old.shards == shards {
		return old
	}
	return rt.putLocked(r)
}

// forget drops route r, when a shard was not found: the campaign may have
// been created again with another shard count.
func (rt *router) forget(r *route) {
	rt.mu.Lock()
	if rt.routes[r.id] == r {
		delete(rt.routes, r.id)
	}
	rt.mu.Unlock()
}

// fanOut serves a batch by its users' home shards under route r, one
// call of shard per shard that has some: user(i) is the user of request
// i, and shard serves the requests at indexes is (in batch order) on
// shard k, answering into sub. fanOut writes the answers into out and a
// request's failure (shard's error, else its own in shard's each) into
// each, which stays nil when nothing failed.
func fanOut[R any](r *route, out []R, user func(i int) string, shard func(k int, is []int, sub []R) ([]error, error)) (each []error) {
	idx := make([][]int, r.shards)
	for i := range out {
		k := redisstore.HomeShard(user(i), r.shards)
		idx[k] = append(idx[k], i)
	}
	for k, is := range idx {
		if len(is) == 0 {
			continue
		}
		sub := make([]R, len(is))
		subEach, err := shard(k, is, sub)
		for j, i := range is {
			out[i] = sub[j]
			e := err
			if e == nil && subEach != nil {
				e = subEach[j]
			}
			if e != nil {
				if each == nil {
					each = make([]error, len(out))
				}
				each[i] = e
			}
		}
	}
	return each
}

// pick returns the requests of reqs at indexes is, in that order: a
// shard's part of a batch.
func pick[Q any](reqs []Q, is []int) []Q {
	part := make([]Q, len(is))
	for j, i := range is {
		part[j] = reqs[i]
	}
	return part
}

// maxRefills bounds the refills one batch waits for: other processes may
// take what a refill brought before this batch asks again. Under the pop
// frontier a refill that borrows hands over sealed packets the borrower
// must open before it can pop them, so a race for the last packets of a
// small campaign can take several rounds; each round moves or opens
// packets or finds the campaign sold out, and the batch's deadline bounds
// the whole.
const maxRefills = 32

// errNothingLeft says that no shard has anything left to lend.
var errNothingLeft = errors.New("no amount left on any shard")

// serveDry serves the requests a dry shard answered DRY (dry says which
// answers in out are): refill brings the shard what need of them need,
// then retry asks again for the requests at indexes idx, answering into
// again, until none is left dry. A request still dry after maxRefills, or
// whose refill failed, gets ErrBusy: nothing was granted or reserved for
// it, and a retry is safe; but a refill that failed with ErrUnavailable
// (Redis takes no writes, the ledger could not record the next block)
// gets that, so that the answer says what is missing, not that Redis is
// busy. When refill finds nothing left anywhere (errNothingLeft), the dry
// requests are answered *exhausted.
func serveDry[R any](out []R, dry func(R) bool, exhausted *R, refill func(need int) error, retry func(idx []int, again []R) error) []error {
	each := make([]error, len(out))
	for attempt := 0; ; attempt++ {
		var idx []int
		for i, o := range out {
			if dry(o) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return each
		}
		fail := func(err error) []error {
			for _, i := range idx {
				each[i] = err
			}
			return each
		}
		if attempt == maxRefills {
			return fail(ErrBusy)
		}
		err := refill(len(idx))
		if exhausted != nil && errors.Is(err, errNothingLeft) {
			for _, i := range idx {
				out[i] = *exhausted
			}
			return each
		}
		if err != nil && !errors.Is(err, ErrUnavailable) {
			err = &kindError{kind: ErrBusy, cause: err}
		}
		if err != nil {
			return fail(err)
		}
		again := make([]R, len(idx))
		if err := retry(idx, again); err != nil {
			return fail(err)
		}
		for j, i := range idx {
			out[i] = again[j]
		}
	}
}
