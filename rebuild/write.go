package rebuild

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// freeze freezes every shard, the root first, under a new token, and
// keeps the state the root had before any rebuild.
func (r *run) freeze(ctx context.Context) error {
	r.token = newToken()
	for k, keys := range r.shards {
		prior, err := r.store.FreezeForRebuild(ctx, keys, r.token)
		if err != nil {
			return err
		}
		if k == 0 {
			r.prior = prior
		}
	}
	return nil
}

// fence fences settlement off in the ledger, after the freeze and before
// the read: Fence takes the campaign's lock, so every write of the
// campaign in flight has committed when it returns, and the ledger
// refuses every later one prepared under the old fence (a batch a worker
// read before the freeze); the read below then sees all the ledger will
// ever hold from the Redis that was lost. A campaign nothing funded yet
// (the worker funds it with its first batch) is funded first, from its
// terms, as the worker would from its meta: Fence needs the row.
//
// Stopped here or later, the rebuild run again raises the fence again;
// a fence raised and never written into Redis only refuses writes from
// a Redis the rebuild replaces anyway, and the shards stay frozen until a
// rebuild writes one.
func (r *run) fence(ctx context.Context) error {
	l := r.cfg.Ledger
	f, err := l.Fence(ctx, r.id)
	if errors.Is(err, ledger.ErrNotFunded) {
		c := ledger.Campaign{ID: r.id, Funding: r.terms.Funding, Total: r.terms.Total}
		if err := l.Fund(ctx, c); err != nil {
			return fmt.Errorf("fund the campaign before fencing it: %w", err)
		}
		r.rep.Funded = true
		f, err = l.Fence(ctx, r.id)
	}
	if err != nil {
		return fmt.Errorf("fence settlement off: %w", err)
	}
	r.fenceN, r.rep.LedgerFence = f, f
	return nil
}

// read reads every frozen shard and the ledger's grants (after the
// freeze and the fence: whatever settled before them is in them, and
// nothing read from the lost Redis settles after), and plans.
func (r *run) read(ctx context.Context) error {
	ev := &evidence{shards: len(r.shards), cents: r.cents, lost: r.terms.Lost, release: r.cfg.ReleaseQuarantineRiskingDoubleGrants}
	for _, keys := range r.shards {
		c, err := r.store.ReadShard(ctx, keys)
		if err != nil {
			return err
		}
		ev.redis = append(ev.redis, c)
		if c.Found() {
			r.rep.ShardsSurvived++
		}
		if !c.Blocklist {
			r.rep.BlocklistLostShards++
		}
	}
	err := r.cfg.Ledger.Grants(ctx, r.id, func(g ledger.Grant) error { ev.grants = append(ev.grants, g); return nil })
	if err != nil {
		return err
	}
	r.ev = ev
	if err := r.readBlocks(ctx); err != nil {
		return err
	}
	if r.now, err = r.store.Now(ctx); err != nil {
		return err
	}
	r.plan, err = makePlan(ev)
	return err
}

// readBlocks reads the blocks the engine opened, after the freeze: no
// block opens while the shards are frozen, and a packet is popped only
// from a block recorded before. Without a frontier (terms.Block 0, a
// campaign created without one) any packet may have been popped.
func (r *run) readBlocks(ctx context.Context) error {
	if r.terms.Block == 0 {
		return nil
	}
	r.ev.opened = make([]bool, len(r.cents)+1)
	return r.cfg.Ledger.Blocks(ctx, r.id, func(b ledger.Block) error {
		r.rep.OpenedBlocks++
		for _, s := range b.Seqs {
			if s >= 1 && s <= int64(len(r.cents)) {
				r.ev.opened[s] = true
			}
		}
		return nil
	})
}

// decide settles the state the campaign is restored in: closed as it was,
// or as an operator closed it (recorded in the terms), or by its window,
// or sold out when no packet is left; else scheduled or open by the
// Redis clock.
func (r *run) decide(context.Context) error {
	t, m := r.terms, r.rootMeta
	r.state = "open"
	switch {
	case r.prior == "closed":
		r.state, r.reason = "closed", m["close_reason"]
		r.closedAt, _ = strconv.ParseInt(m["closed_at"], 10, 64)
		if r.reason == "" {
			r.reason, r.closedAt = "time", t.ClosesAt
		}
	case t.CloseReason != "":
		r.state, r.reason, r.closedAt = "closed", t.CloseReason, t.ClosedAt
	case r.now >= t.ClosesAt:
		r.state, r.reason, r.closedAt = "closed", "time", t.ClosesAt
	case r.plan.pool == 0:
		r.state, r.reason, r.closedAt = "closed", "sold_out", r.now
	case r.now < t.OpensAt:
		r.state = "scheduled"
	}
	r.decidePause()
	return nil
}

// decidePause settles whether the campaign comes back paused: on the
// operator's order, or when the root or any surviving shard is (a pause
// writes every shard, the root last; one that stopped half way is paused
// whole rather than left granting). Read after the freeze, so a pause
// written before it is seen; the swap keeps meta's paused and activate
// writes it on every shard.
func (r *run) decidePause() {
	rep := r.rep
	switch {
	case r.cfg.Paused:
		rep.PauseSource = "config"
	default:
		for k, c := range r.ev.redis {
			if c.Meta["paused"] == "1" {
				rep.PauseSource = "shard " + strconv.Itoa(k)
				if k == 0 {
					rep.PauseSource = "root"
				}
				break
			}
		}
	}
	r.paused = rep.PauseSource != ""
	rep.Paused = r.paused
	rep.PauseUnknown = !r.paused && rep.ShardsSurvived < len(r.shards)
}

// write records the terms in the ledger, with the lost packets (first:
// once Redis changes, the ledger must know them), then stages and swaps
// every shard.
func (r *run) write(ctx context.Context) error {
	t := r.terms
	t.Lost = r.plan.lost
	if r.state == "closed" && (r.reason == "operator" || r.reason == "cancelled") {
		t.CloseReason, t.ClosedAt = r.reason, r.closedAt
	}
	if err := r.cfg.Ledger.WriteTerms(ctx, r.id, t); err != nil {
		return fmt.Errorf("record the terms: %w", err)
	}
	for k, keys := range r.shards {
		if err := r.store.Stage(ctx, keys, r.token, r.plan.shards[k].img); err != nil {
			return err
		}
		if _, err := r.store.Swap(ctx, keys, r.token, r.fenceN, r.meta(k)); err != nil {
			return err
		}
		if testHookSwapped != nil {
			if err := testHookSwapped(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// testHookSwapped, set by tests, runs after each shard's swap: an error
// cuts the rebuild short there, as a crash would.
var testHookSwapped func(k int) error

// owned are the meta fields a rebuild decides; the others are kept.
var owned = func() map[string]bool {
	m := map[string]bool{}
	// The terms (redisstore.TermNames), and the fields of the shard's life.
	for _, f := range append(redisstore.TermNames(), "state", "opens_at", "closes_at",
		"created_at", "granted_count", "granted_cents", "refunded_cents", "close_reason", "closed_at", "load_token",
		"staged_count", "staged_cents", "shards", "shard", "base_count", "base_cents", "in_count", "in_cents",
		"out_count", "out_cents", "xfer_seq", "lost_count", "lost_cents", "rebuilt_at", "rebuild_token",
		"rebuild_from", "rebuild_swapped", "block", "sealed", redisstore.LedgerFence, redisstore.OwnerField) {
		m[f] = true
	}
	return m
}()

// meta is shard k's new meta.
func (r *run) meta(k int) redisstore.RebuiltMeta {
	kept := map[string]string{}
	for name, v := range r.ev.redis[k].Meta {
		if !owned[name] {
			kept[name] = v
		}
	}
	sh, t := r.plan.shards[k], r.terms
	created := r.rootMeta["created_at"]
	if created == "" {
		created = strconv.FormatInt(t.OpensAt, 10)
	}
	m := redisstore.RebuiltMeta{
		Kept:         kept,
		GrantedCount: sh.grantedCount, GrantedCents: sh.grantedCents,
		LostCount: sh.lostCount, LostCents: sh.lostCents,
		OpensAt: t.OpensAt, ClosesAt: t.ClosesAt, CreatedAt: created,
		RebuiltAt: r.now, RebuildFrom: r.prior,
	}
	if r.state == "closed" {
		m.CloseReason, m.ClosedAt = r.reason, r.closedAt
	}
	if t.Block > 0 {
		// The pools go back sealed: the engine opens them again, block by
		// block, each recorded before its packets can be popped.
		m.Frontier = &redisstore.Frontier{Block: t.Block, Sealed: sh.poolCount}
	}
	if len(r.shards) > 1 {
		m.Share = &redisstore.ShardShare{Shards: len(r.shards), Shard: k,
			BaseCount: sh.grantedCount + sh.poolCount + sh.lostCount,
			BaseCents: sh.grantedCents + sh.poolCents + sh.lostCents}
	}
	if k == 0 {
		// The owner a surviving root records wins over the terms': an
		// operator's change reaches the terms after Redis.
		t.Owner = cmp.Or(r.rootMeta[redisstore.OwnerField], t.Owner)
		m.Terms = &t
	}
	return m
}

// activate makes every shard live, the root last, registers the
// campaign again and fills the report.
func (r *run) activate(ctx context.Context) error {
	for k := len(r.shards) - 1; k >= 0; k-- {
		if err := r.store.ActivateRebuilt(ctx, r.shards[k], r.token, r.state, r.paused, r.reason, r.closedAt); err != nil {
			return err
		}
	}
	if err := r.store.Register(ctx, redisstore.RedPacket, r.id, r.terms.ClosesAt); err != nil {
		return err
	}
	r.report()
	return nil
}

// report fills the report from the plan.
func (r *run) report() {
	rep, p := r.rep, r.plan
	rep.State = r.state
	rep.RestoredClaims, rep.ToSettle, rep.RestoredPool = p.claims, p.toSettle, p.pool
	rep.Unrecoverable, rep.UnrecoverableCents = int64(len(p.lost)), p.lostCents
	rep.Quarantined, rep.QuarantinedCents, rep.Released, rep.ReleasedCents = p.quarantined, p.quarantinedCents, p.released, p.releasedCents
	rep.UnrecoverablePackets = append(rep.UnrecoverablePackets, p.lost...)
	rep.LedgerGrants = int64(len(r.ev.grants))
	rep.Conflicts, rep.ConflictCount = append(rep.Conflicts, p.conflicts...), p.nConflicts
	note := func(format string, a ...any) { rep.Notes = append(rep.Notes, fmt.Sprintf(format, a...)) }
	if gone := len(r.shards) - rep.ShardsSurvived; gone > 0 {
		note("%d of %d shards kept nothing: a grant one of them acknowledged after the last one the ledger holds left no record, "+
			"cannot be counted, and its user holds no claim; its packet is quarantined, never granted again (with WAIT none is lost in a failover; "+
			"after a loss of every copy of the data, the grants not yet settled are)", gone, len(r.shards))
	} else {
		note("every shard kept its state: a grant acknowledged after that state was last copied and never settled " +
			"left no record and cannot be counted (none with WAIT)")
	}
	if rep.Unrecoverable > 0 {
		note("%d packets (%d cents) are kept out of the pool: each was granted, and no record names to whom; "+
			"they are refunded with the campaign unless their holders are found", rep.Unrecoverable, rep.UnrecoverableCents)
	}
	if rep.Quarantined > 0 {
		note("%d packets (%d cents) are quarantined: each is in a block of a pool that was opened for grabs (%d blocks recorded), "+
			"so it may have been granted, and no record places it; they are refunded with the campaign. "+
			"--release-quarantine-risking-double-grants puts them back in the pool, and pays twice any of them that was granted",
			rep.Quarantined, rep.QuarantinedCents, rep.OpenedBlocks)
	}
	if rep.Released > 0 {
		note("%d packets (%d cents) that may have been granted were released into the pool on the operator's order: "+
			"any of them granted before the loss can be granted again", rep.Released, rep.ReleasedCents)
	}
	r.notePause(note)
	if rep.ToSettle > 0 {
		note("%d restored grants are not in the ledger yet; they wait in the grants streams for settlement", rep.ToSettle)
	}
	if rep.ConflictCount > 0 {
		note("%d records disagreed with the ledger or with each other and were not followed (see conflicts)", rep.ConflictCount)
	}
}

// notePause says what the rebuild did with the pause and the blocked
// users, and what the operator should check.
func (r *run) notePause(note func(format string, a ...any)) {
	rep := r.rep
	switch {
	case rep.Paused:
		note("the campaign is paused (%s): every shard answers Paused until `hongbao campaign resume`", rep.PauseSource)
	case rep.PauseUnknown:
		note("%d of %d shards lost their pause flag with their meta and no surviving shard is paused: "+
			"if the campaign was paused, pause it again (or rebuild with --paused)", len(r.shards)-rep.ShardsSurvived, len(r.shards))
	}
	if rep.BlocklistLostShards > 0 {
		note("%d of %d shards lost their blocked users: they block nobody now; block those users again (hongbao campaign block)",
			rep.BlocklistLostShards, len(r.shards))
	}
}
