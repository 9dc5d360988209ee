package hongbao

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Coalescing of discount calls (batcher.go): as for grabs, concurrent
// requests of one operation on one shard share script calls, up to
// MaxBatch (at most redisstore.MaxDiscountBatch) a call. Each operation
// (reserve, confirm, cancel) has its own lanes: its own script and its
// own answers.

// The discount operations, indexes of route.calls.
const (
	opReserve opcode = iota
	opConfirm
	opCancel
)

// newDiscountRoute lays out a discount campaign of namespace ns: its keys are the shards'
// campaign views (what transfers and the audit read), its calls the KEYS
// of disc_reserve.lua, disc_confirm.lua and disc_cancel.lua.
func newDiscountRoute(ns redisstore.Namespace, id string, shards int) *route {
	layout := ns.DiscountLayout(id, shards)
	r := &route{id: id, shards: shards, keys: redisstore.ShardViews(layout)}
	r.calls = make([][][]string, opCancel+1)
	for op := range r.calls {
		r.calls[op] = make([][]string, shards)
	}
	for k, keys := range layout {
		r.calls[opReserve][k] = keys.ReserveKeys()
		r.calls[opConfirm][k] = keys.ConfirmKeys()
		r.calls[opCancel][k] = keys.CancelKeys()
	}
	return r
}

// discounter coalesces the calls of discount campaigns.
type discounter struct {
	batcher[redisstore.DiscountCall, redisstore.DiscountResult]
	store *redisstore.Store
}

func newDiscounter(store *redisstore.Store, cfg Config, lf *life, obs *observers) *discounter {
	d := &discounter{store: store}
	d.init(cfg, lf, obs, min(cfg.MaxBatch, redisstore.MaxDiscountBatch), func(id string, shards int) *route { return newDiscountRoute(store.NS(), id, shards) }, d.exec)
	d.ops = []string{opReserve: "reserve", opConfirm: "confirm", opCancel: "cancel"}
	return d
}

// exec runs one batch of lane l. err fails the whole batch; each, when
// not nil, fails single requests.
func (d *discounter) exec(ctx context.Context, l *lane[redisstore.DiscountCall, redisstore.DiscountResult], reqs []redisstore.DiscountCall, out []redisstore.DiscountResult) (each []error, err error) {
	if r := d.current(l.key.id); r != l.route {
		return d.execRouted(ctx, l.key.op, r, reqs, out, 0)
	}
	return d.execShard(ctx, l.key.op, l.route, l.key.shard, reqs, out, 0)
}

// execRouted serves requests by their users' home shards under route r,
// one script call per shard that has some.
func (d *discounter) execRouted(ctx context.Context, op opcode, r *route, reqs []redisstore.DiscountCall, out []redisstore.DiscountResult, depth int) (each []error, err error) {
	if depth > maxReroutes {
		return nil, fmt.Errorf("discount %s: its shard count keeps changing", r.id)
	}
	home := func(i int) string { return reqs[i].User }
	return fanOut(r, out, home, func(k int, is []int, sub []redisstore.DiscountResult) ([]error, error) {
		return d.execShard(ctx, op, r, k, pick(reqs, is), sub, depth)
	}), nil
}

// execShard runs op's script on shard k of route r and handles what a
// sharded campaign can answer beyond a one-shard one: a stale layout, a
// shard that does not exist, a dry shard.
func (d *discounter) execShard(ctx context.Context, op opcode, r *route, k int, reqs []redisstore.DiscountCall, out []redisstore.DiscountResult, depth int) (each []error, err error) {
	err = d.call(ctx, op, r, k, reqs, out)
	var se *redisstore.ShardsError
	if errors.As(err, &se) {
		return d.execRouted(ctx, op, d.learn(r.id, se.Shards), reqs, out, depth+1)
	}
	if err != nil || r.shards == 1 {
		return nil, err
	}
	if k > 0 && anyCode(out, redisstore.DiscountNoCampaign) {
		// Gone, or made again with another layout: ask its root.
		d.forget(r)
		return d.execRouted(ctx, op, d.current(r.id), reqs, out, depth+1)
	}
	if op != opReserve || !anyCode(out, redisstore.DiscountDry) {
		return nil, nil
	}
	return d.serveDry(ctx, r, k, reqs, out), nil
}

func anyCode(out []redisstore.DiscountResult, code int) bool {
	return slices.ContainsFunc(out, func(o redisstore.DiscountResult) bool { return o.Code == code })
}

// call runs op's script once on shard k of route r.
func (d *discounter) call(ctx context.Context, op opcode, r *route, k int, reqs []redisstore.DiscountCall, out []redisstore.DiscountResult) error {
	switch op {
	case opReserve:
		return d.store.Reserve(ctx, r.calls[op][k], r.shards, reqs, out)
	case opConfirm:
		return d.store.Confirm(ctx, r.calls[op][k], r.shards, reqs, out)
	default:
		return d.store.Cancel(ctx, r.calls[op][k], r.shards, reqs, out)
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

// Stats returns the engine's discount counters.
func (ds Discounts) Stats() DiscountStats {
	d := ds.e.discounts
	return DiscountStats{Batches: d.batches.Load(), Requests: d.requests.Load(), Transfers: d.transfers.Load(), Moved: d.moved.Load()}
}
