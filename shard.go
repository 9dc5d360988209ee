package hongbao

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Sharded campaigns. A campaign of S shards keeps S groups of keys, each
// under its own hash tag (redisstore.ShardTag), so a Redis Cluster spreads
// them over its masters. A user's claim lives only on the user's home
// shard (HomeShard), so "at most one packet per user" stays one script on
// one slot. When a shard runs dry while others still hold packets, the
// engine that met the dry shard moves packets to it by a journaled
// transfer (redisstore's TakeTransfer, ApplyTransfer, FinishTransfer) and
// asks again: on demand, not ahead of time, because homes are only
// statistically even and a transfer ahead of demand may move packets to
// where nobody asks for them. A transfer takes half of the richest
// shard's pool (at least what the batch needs, at most MaxTransfer), so a
// shard that keeps running dry borrows in steps that halve what is left
// elsewhere: the number of transfers grows with the log of the packets,
// not with the grabs. SOLD_OUT is answered only when every packet of every
// shard is granted; the engine then closes every shard, reason sold_out.

// maxReroutes bounds how often one batch is routed again (each time a
// script said the layout was stale, so nothing was written).
const maxReroutes = 3

// execRouted serves users by their home shards under route r, one script
// call per shard that has some, and writes their answers into out.
func (c *coalescer) execRouted(ctx context.Context, r *route, users []string, out []redisstore.GrabResult, depth int) (each []error, err error) {
	if depth > maxReroutes {
		return nil, fmt.Errorf("campaign %s: its shard count keeps changing", r.id)
	}
	home := func(i int) string { return users[i] }
	return fanOut(r, out, home, func(k int, is []int, sub []redisstore.GrabResult) ([]error, error) {
		return c.execShard(ctx, r, k, pick(users, is), sub, depth)
	}), nil
}

// execShard runs grab.lua on shard k of route r for users, and handles
// what a sharded campaign can answer beyond a one-shard one: a stale
// layout, a shard that does not exist, a dry shard.
func (c *coalescer) execShard(ctx context.Context, r *route, k int, users []string, out []redisstore.GrabResult, depth int) (each []error, err error) {
	low, err := c.store.GrabHinted(ctx, r.calls[opGrab][k], r.shards, users, out)
	if low && err == nil && !anyOutcome(out, redisstore.Sealed) {
		c.prefetch(r.id, k, r.keys[k])
	}
	var se *redisstore.ShardsError
	if errors.As(err, &se) {
		return c.execRouted(ctx, c.learn(r.id, se.Shards), users, out, depth+1)
	}
	if err == nil && r.shards == 1 && anyOutcome(out, redisstore.Sealed) {
		return c.serveDry(ctx, r, k, users, out), nil
	}
	if err != nil || r.shards == 1 {
		return nil, err
	}
	if k > 0 && anyOutcome(out, redisstore.NoCampaign) {
		// A shard that does not exist: the campaign is gone, or was made
		// again with fewer shards. Ask its root.
		c.forget(r)
		return c.execRouted(ctx, c.current(r.id), users, out, depth+1)
	}
	if !anyOutcome(out, redisstore.Dry) && !anyOutcome(out, redisstore.Sealed) {
		return nil, nil
	}
	return c.serveDry(ctx, r, k, users, out), nil
}

func anyOutcome(out []redisstore.GrabResult, code int) bool {
	return slices.ContainsFunc(out, func(o redisstore.GrabResult) bool { return o.Outcome == code })
}

// serveDry refills dry shard k and asks again for the users it answered
// DRY, until none is left dry (see serveDry). A red packet refill never
// finds nothing left: it closes the campaign, sold out, and the users
// asked again are answered SOLD_OUT.
func (c *coalescer) serveDry(ctx context.Context, r *route, k int, users []string, out []redisstore.GrabResult) []error {
	dry := func(o redisstore.GrabResult) bool {
		return o.Outcome == redisstore.Dry || o.Outcome == redisstore.Sealed
	}
	refill := func(need int) error { return c.refill(ctx, r, k, need) }
	return serveDry(out, dry, nil, refill, func(idx []int, again []redisstore.GrabResult) error {
		return c.store.Grab(ctx, r.calls[opGrab][k], r.shards, pick(users, idx), again)
	})
}

// refill brings packets to dry shard k for need users: from the shard
// with the most, by one transfer. When no other pool has any, it finishes
// the transfers in flight (anyone's: every step is idempotent), and when
// there are none it checks whether every packet is granted, and if so
// closes the campaign, sold out. It returns nil when the caller should
// ask again.
func (c *coalescer) refill(ctx context.Context, r *route, k, need int) error {
	// The shard's own sealed packets first: a block to open (frontier.go).
	if found, err := c.openNext(ctx, r.id, k, r.keys[k], 1); found || err != nil || r.shards == 1 {
		return err
	}
	moved, err := c.store.Borrow(ctx, r.keys, k, need)
	c.borrowed(moved)
	if err == nil && moved > 0 {
		// What came arrived sealed under the frontier: open it now, so a
		// refill is one round of asking again, as without the frontier.
		_, err = c.openNext(ctx, r.id, k, r.keys[k], 1)
		if errors.Is(err, errNoRecorder) {
			err = nil
		}
	}
	if !errors.Is(err, redisstore.ErrNothingToLend) {
		return err
	}
	snaps, err := c.store.StatusAll(ctx, r.keys)
	if err != nil {
		return err
	}
	// Packets a rebuild kept out (lost, quarantined) will never be
	// granted: the campaign is sold out once the rest are.
	var gone int64
	for _, s := range snaps {
		gone += s.Int("granted_count") + s.Int("lost_count")
	}
	if gone < snaps[0].Int("count") {
		return nil // packets moved between our reads; look again
	}
	return closeShards(ctx, c.store, r.keys, CloseSoldOut)
}

// closeShards closes every shard of a campaign for reason, the root last:
// the root's state is the campaign's, so it says closed only once every
// shard is. Closing a closed shard changes nothing.
func closeShards(ctx context.Context, s *redisstore.Store, shards []redisstore.Keys, reason string) error {
	for k := len(shards) - 1; k >= 0; k-- {
		if _, _, _, err := s.Close(ctx, shards[k], reason); err != nil {
			return err
		}
	}
	return nil
}

// createSharded loads and activates a campaign of c.Shards shards. The
// root begins first: it alone decides whether the campaign exists, and
// whether this create holds its load (create.go). Then every other shard
// begins under the epoch the root's begin drew (one left live by a create
// that crashed before its root went live is loaded afresh, if it never
// granted, lent or borrowed a packet; one a newer load began means this
// load was taken over), each loads its share, every other shard
// activates, and the root last: until the root is live the campaign is
// not found, so nobody who learned of it from Create or Status ever sees
// it in part. Every shard gets the same window, resolved once by the
// Redis clock. Stopped anywhere before the root's activation, the
// campaign stays loading under this create's hold until it lapses, and
// the next create of the id begins every shard again.
func (e *Engine) createSharded(ctx context.Context, c *Campaign, spec Spec, amounts []int64, settled bool) (act redisstore.Activation, err error) {
	r := newRoute(e.store.NS(), c.ID, c.Shards)
	shares := deal(amounts, c.Shards)
	l := redisstore.Loader{Token: newToken(), Hold: e.cfg.LoadHold}
	b, err := e.store.Begin(ctx, r.keys[0], l, e.shardMeta(c, 0, shares[0]))
	if err := begun("create", c.ID, b, err); err != nil {
		return redisstore.Activation{}, err
	}
	h := e.keep(ctx, r.keys[0], l.Token)
	defer func() {
		if lost := h.stop(); err != nil && !lost && !isHeld(err) {
			e.giveUp(h, r.keys[0], l.Token)
		}
	}()
	// Stopped from here to the root's activation, the campaign is loading
	// under this create's hold (as in createOne); shards activated before
	// the root never served, and the create that takes the load over
	// begins them again.
	l.Epoch = b.Epoch
	for k := 1; k < c.Shards; k++ {
		b, err := e.store.Begin(h.ctx, r.keys[k], l, e.shardMeta(c, k, shares[k]))
		if err := h.shardBegun("create", c.ID, b, err); err != nil {
			return redisstore.Activation{}, err
		}
	}
	if settled {
		// As in createOne: nothing of it past loading, never live again.
		return redisstore.Activation{}, opErr("create", c.ID, ErrCampaignRetired)
	}
	before := 0
	for k, keys := range r.keys {
		if err := e.store.Load(h.ctx, keys, l.Token, int64(k+1), int64(c.Shards), shares[k], e.progress(c.Count, before)); err != nil {
			return redisstore.Activation{}, h.lostErr(c.ID, opErr("create", c.ID, mapStoreErr(err)))
		}
		before += len(shares[k])
	}
	opens, closes, err := e.record(h.ctx, c, spec, amounts, true)
	if err != nil {
		return redisstore.Activation{}, h.lostErr(c.ID, err)
	}
	if err := e.register(h.ctx, "create", c.ID, kindRedPacket, closes); err != nil {
		return redisstore.Activation{}, h.lostErr(c.ID, err)
	}
	for k := c.Shards - 1; k > 0; k-- {
		if _, err := e.store.Activate(h.ctx, r.keys[k], l.Token, opens, closes, e.cfg.DefaultWindow.Milliseconds()); err != nil {
			return redisstore.Activation{}, h.lostErr(c.ID, e.activateErr(ctx, c.ID, kindRedPacket, spec, err))
		}
	}
	// As in createOne, the keeper stops before the root's activation.
	if h.stop() {
		return redisstore.Activation{}, &heldError{id: c.ID}
	}
	act, err = e.store.Activate(ctx, r.keys[0], l.Token, opens, closes, e.cfg.DefaultWindow.Milliseconds())
	if err != nil {
		return redisstore.Activation{}, e.activateErr(ctx, c.ID, kindRedPacket, spec, err)
	}
	e.co.learn(c.ID, c.Shards)
	return act, nil
}

// window resolves a spec's open window in ms: an open time not given is
// now by the Redis clock, a close time not given is the default window
// after the open time.
func (e *Engine) window(ctx context.Context, spec Spec) (opens, closes int64, err error) {
	opens, closes = unixMs(spec.OpensAt), unixMs(spec.ClosesAt)
	if opens == 0 {
		if opens, err = e.store.Now(ctx); err != nil {
			return 0, 0, err
		}
	}
	if closes == 0 {
		closes = opens + e.cfg.DefaultWindow.Milliseconds()
	}
	return opens, closes, nil
}

// deal deals the split's packets to shards after the shuffle the split
// made: packet seq i+1 goes to shard i mod shards, so every shard holds the
// same count (give or take one) and statistically the same amounts.
func deal(amounts []int64, shards int) [][]int64 {
	out := make([][]int64, shards)
	for k := range out {
		out[k] = make([]int64, 0, (len(amounts)+shards-1)/shards)
	}
	for i, a := range amounts {
		out[i%shards] = append(out[i%shards], a)
	}
	return out
}

// shardMeta is the meta of shard k, dealt share: on every shard the
// layout and its share, on the root the terms.
func (e *Engine) shardMeta(c *Campaign, k int, share []int64) redisstore.Meta {
	sh := dealt(c.Shards, k, share)
	m := redisstore.Meta{Share: &sh, Frontier: e.frontier(len(share))}
	if k == 0 {
		m.Terms = metaTerms(c)
	}
	return m
}

// dealt is shard k's part of a campaign of shards shards, dealt share.
func dealt(shards, k int, share []int64) redisstore.ShardShare {
	var cents int64
	for _, a := range share {
		cents += a
	}
	return redisstore.ShardShare{Shards: shards, Shard: k, BaseCount: int64(len(share)), BaseCents: cents}
}
