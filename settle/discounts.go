package settle

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Discount campaigns settle like red packet campaigns, through the same
// passes: the budget is funded into the campaign's escrow (under the
// ledger id ledger.DiscountCampaign(id)), each shard's confirms stream is
// read with the consumer group and its confirmed discounts written in one
// ledger transaction per batch (escrow -> user, idempotent by campaign,
// user and order) before the entries are acknowledged, and once the
// campaign is closed, drained and holds no reservation, the leftover
// (budget - confirmed) is refunded once, then recorded in Redis shard by
// shard, the root last, and the campaign is reconciled and retired.
//
// A closed campaign's reservations still held wait for their confirm
// until their hold ends; the worker then expires them itself (the
// reaper's script, disc_reap.lua), so a settlement worker alone finishes
// a campaign. While a campaign is open its expiries are the reaper's
// (hongbao.Discounts.RunReaper, run by serve under the scheduler
// lease). A campaign whose every unit is confirmed, with nothing held, is
// closed by the worker, reason exhausted.

// DiscountSink is a Sink that also takes confirmed discounts: what a
// custom sink implements to settle discount campaigns. ledger.Ledger is
// one (so are the PostgreSQL and SQLite ledgers); a webhook.Sink is not.
// A worker whose sink is not one settles red packet campaigns only, and
// leaves discount campaigns alone: their confirmed discounts stay pending
// in Redis, nothing is funded or refunded, the campaign stays registered
// for a worker that takes them, and the worker says so once in its log
// ("the sink takes no discounts").
type DiscountSink interface {
	// ApplyDiscounts writes a batch of one discount campaign's confirmed
	// discounts atomically and says which it refused as conflicting, as
	// Sink.ApplyGrants does grants. The campaign is
	// ledger.DiscountCampaign of the campaign's id, and Fund and Refund
	// of the Sink receive the same name for its budget and its leftover.
	ApplyDiscounts(ctx context.Context, campaign string, ds []ledger.Discount) (ledger.DiscountResult, error)
}

// Every ledger settles discount campaigns.
var _ DiscountSink = ledger.Ledger(nil)

// CloseExhausted is the close reason of a discount campaign whose every
// discount is confirmed (hongbao.CloseExhausted).
const CloseExhausted = "exhausted"

// discountSink returns the sink as a DiscountSink.
func (w *Worker) discountSink() (DiscountSink, bool) {
	ds, ok := w.sink.(DiscountSink)
	if !ok {
		w.noDiscounts.Do(func() {
			w.log.Warn("the sink takes no discounts; discount campaigns are left unsettled")
		})
	}
	return ds, ok
}

// discount settles what it can of discount campaign id: every shard's
// confirms stream, the transfers a dead process left, the close when its
// window ended or it is exhausted, the expiries of a closed campaign, and
// the refund once it is closed, drained and holds nothing.
func (w *Worker) discount(ctx context.Context, k *kind, id string) (work int, unsettled int64, open bool, err error) {
	if _, ok := w.discountSink(); !ok {
		return 0, 0, false, nil
	}
	_, root := w.holds(id, 0)
	v, work, open, done, err := begin(ctx, w, id, root, k, w.store.ReadDiscount, w.retireDiscount)
	if done {
		return work, 0, open, err
	}
	views := redisstore.ShardViews(v.Shards)
	work, unsettled, err = w.streams(ctx, id, views, v.Root(), k)
	if err != nil || !root {
		return work, unsettled, true, err
	}
	n, closed, err := w.closeDiscount(ctx, v, views)
	work += n
	if err != nil || !closed || unsettled > 0 {
		return work, unsettled, true, err
	}
	done, left, err := w.refundDiscount(ctx, k, id)
	if err != nil || !done {
		return work, unsettled + left, true, err
	}
	return work + 1, 0, false, nil
}

// closeDiscount finishes stale transfers, closes the campaign when due
// (its window, or nothing left and nothing held) and, once it is closed,
// expires its reservations past their hold. closed says whether every
// shard is closed.
func (w *Worker) closeDiscount(ctx context.Context, v *redisstore.DiscountView, views []redisstore.Keys) (work int, closed bool, err error) {
	if len(views) > 1 {
		if work, err = w.store.Recover(ctx, views, staleTransfer); err != nil {
			return work, false, err
		}
	}
	rv := &redisstore.View{ID: v.ID, Shards: views, Snaps: v.Snaps}
	closed, changed, err := w.closeIfDue(ctx, rv)
	if err != nil {
		return work, false, err
	}
	if !closed && exhausted(v) {
		for k := len(views) - 1; k >= 0; k-- {
			if _, _, _, err := w.store.Close(ctx, views[k], CloseExhausted); err != nil {
				return work, false, err
			}
		}
		closed, changed = true, true
		w.log.Info("discount campaign exhausted: every discount confirmed", "discount", v.ID)
	}
	if changed {
		work++
	}
	if !closed {
		return work, false, nil
	}
	for _, k := range v.Shards {
		for more := true; more; {
			var n int
			if n, more, err = w.store.Reap(ctx, k, redisstore.MaxReap); err != nil {
				return work, true, err
			}
			work += n
		}
	}
	return work, true, nil
}

// exhausted says whether nothing is left to reserve and nothing is held,
// so nothing can ever come back: no amount in a pool or in flight, no
// reservation.
func exhausted(v *redisstore.DiscountView) bool {
	var left, held int64
	for _, sn := range v.Snaps {
		left += sn.PoolLen + sn.Int("out_count") - sn.Int("in_count")
		held += sn.Int("reserved_count")
	}
	return left == 0 && held == 0
}

// applyDiscounts writes the confirmed discounts of entries to the sink
// and acknowledges them, as apply does grants: conflicts go to the dead
// stream, and a failed write is split and retried (applyFailed). An
// order is confirmed once, so its key stands in one entry.
func (w *Worker) applyDiscounts(ctx context.Context, sh shard, es []redisstore.Entry) error {
	sink, _ := w.discountSink()
	lid := sh.kind.ledgerID(sh.id)
	var ds []ledger.Discount
	for _, e := range es {
		for _, g := range e.Grants {
			user, order, ok := redisstore.SplitOrderKey(g.User)
			if !ok {
				w.tell(&w.malformed, hongbao.SettleMalformed, sh.id, 1, nil)
				w.log.Error("malformed confirms entry moved to the dead stream", "discount", sh.id, "entry", e.ID, "field", g.User)
				return w.store.Dead(ctx, sh.keys, e.ID, "malformed: field "+g.User, e.Raw)
			}
			ds = append(ds, ledger.Discount{Campaign: lid, User: user, Order: order, Seq: g.Seq, Cents: g.Cents})
		}
	}
	lctx, span := w.ledgerSpan(ctx, "ledger.apply_discounts", len(ds))
	res, err := sink.ApplyDiscounts(fenced(lctx, sh.root), lid, ds)
	endSpan(span, err)
	if err != nil {
		return w.applyFailed(ctx, sh, es, err)
	}
	w.tell(&w.discounts, hongbao.SettleDiscounts, sh.id, int64(res.Inserted), nil)
	w.tell(&w.replayed, hongbao.SettleReplayed, sh.id, int64(res.Replayed), nil)
	bad := map[string][]redisstore.DeadGrant{}
	for _, c := range res.Conflicts {
		w.tell(&w.conflicts, hongbao.SettleConflict, sh.id, 1, nil)
		w.log.Error("INCIDENT: conflicting discount", "discount", sh.id, "kind", c.Kind,
			"user", c.Discount.User, "order", c.Discount.Order, "seq", c.Discount.Seq, "cents", c.Discount.Cents,
			"existing_order", c.Existing.Order, "existing_seq", c.Existing.Seq)
		key := redisstore.OrderKey(c.Discount.User, c.Discount.Order)
		entry := entryOf(es, func(g redisstore.StreamGrant) bool { return g.User == key })
		bad[entry] = append(bad[entry], redisstore.DeadGrant{User: key, Packet: redisstore.FormatPacket(c.Discount.Seq, c.Discount.Cents)})
	}
	return w.ackOrBury(ctx, sh, es, bad)
}

// refundDiscount settles a closed, drained discount campaign that holds no
// reservation: the leftover goes back to the funding account in the
// ledger, once, then every shard records its part in Redis, the root last.
// The ledger's discounts must match Redis's counters first. As refund
// does for red packets, it decides from its own reads: every shard closed
// with no reservation held in the view read here, and its confirms
// stream, read after that view, fully delivered and acknowledged (a
// confirm that landed while the pass read the streams is read again).
func (w *Worker) refundDiscount(ctx context.Context, k *kind, id string) (done bool, left int64, err error) {
	v, err := w.store.ReadDiscount(ctx, id)
	if err != nil {
		return false, 0, err
	}
	root := v.Root()
	if err := w.fund(ctx, k, id, root); err != nil {
		return false, 0, err
	}
	var count, cents int64
	for k, snap := range v.Snaps {
		if snap.Transfers > 0 || snap.Int("reserved_count") > 0 {
			return false, 0, nil // the next passes finish them
		}
		// Dead discounts wait for an operator.
		if n, err := w.drained(ctx, v.Shards[k].Keys(), snap); n != 0 || err != nil {
			return false, max(n, 0), err
		}
		count += snap.Int("confirmed_count")
		cents += snap.Int("confirmed_cents")
	}
	lid := k.ledgerID(id)
	rootKeys := v.Shards[0].Keys()
	if ok, err := w.ledgerAgrees(ctx, rootKeys, k.store.Name, id, lid, count, cents); !ok || err != nil {
		return false, 0, err
	}
	refund := root.Int("budget") - cents
	if err := w.syncDiscountShards(ctx, v.Shards); err != nil {
		return false, 0, err
	}
	if err := w.sink.Refund(fenced(ctx, root), lid, refund); err != nil {
		return false, 0, w.refundFailed(ctx, rootKeys, k.store.Name, id, err)
	}
	w.wakeRollUp()
	changed, err := w.settleDiscountShards(ctx, v, refund)
	if err != nil {
		return false, 0, err
	}
	if changed {
		w.tell(&w.refunds, hongbao.SettleRefund, id, 1, nil)
		w.log.Info("discount campaign settled", "discount", id, "confirmed_cents", cents, "refund_cents", refund)
	}
	return true, 0, w.retireDiscount(ctx, v)
}

// syncDiscountShards waits, with Config.WaitReplicas, until the replicas
// hold every write of every shard so far. The refund waits for it, as a
// red packet refund does: what the refund is computed from, the closed
// state and what each shard holds, is then on the replicas, and a
// failover cannot reopen what the ledger paid back.
func (w *Worker) syncDiscountShards(ctx context.Context, shards []redisstore.DiscountKeys) error {
	for _, k := range shards {
		if err := w.syncReplicas(ctx, k.Keys()); err != nil {
			return err
		}
	}
	return nil
}

// settleDiscountShards records the refund in Redis, each shard its part
// (what its pool and compensation hold), the root last; changed is true
// when the root changed now.
func (w *Worker) settleDiscountShards(ctx context.Context, v *redisstore.DiscountView, refund int64) (bool, error) {
	parts := make([]int64, len(v.Snaps))
	var sum int64
	for k, sn := range v.Snaps {
		parts[k] = sn.Int("base_cents") + sn.Int("in_cents") - sn.Int("out_cents") - sn.Int("confirmed_cents")
		sum += parts[k]
	}
	if sum != refund {
		return false, fmt.Errorf("discount %s: %w: its shards hold %d cents, the refund is %d", v.ID, redisstore.ErrCorrupt, sum, refund)
	}
	changed := false
	for k := len(v.Shards) - 1; k >= 0; k-- {
		c, err := w.store.DiscountSettle(ctx, v.Shards[k], parts[k])
		if err != nil {
			return false, err
		}
		changed = c
	}
	return changed, nil
}

// retireDiscount takes a settled discount campaign out of the registry;
// its keys expire after the retention once a reconcile against the ledger
// finds no difference, and are kept for an operator otherwise.
func (w *Worker) retireDiscount(ctx context.Context, v *redisstore.DiscountView) error {
	retention := w.cfg.Retention
	if w.cfg.Ledger != nil {
		rep, err := reconcileDiscount(ctx, w.store, w.cfg.Ledger, v.ID)
		if err != nil {
			return err
		}
		if !rep.OK {
			w.log.Error("INCIDENT: settled discount campaign does not reconcile; its Redis keys are kept without expiry",
				"discount", v.ID, "differences", rep.Differences)
			retention = -1
		}
	}
	return w.store.Unregister(ctx, redisstore.Discount, v.ID, redisstore.ShardViews(v.Shards), retention)
}

// RedriveDiscount puts the dead discounts of discount campaign id back
// into its shards' confirms streams, for an operator who fixed their
// cause.
func (w *Worker) RedriveDiscount(ctx context.Context, id string) (int64, error) {
	v, err := w.store.ReadDiscount(ctx, id)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, k := range v.Shards {
		n, err := w.store.Redrive(ctx, k.Keys())
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
