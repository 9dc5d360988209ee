package settle

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// shard is one shard of a campaign that settlement works on.
type shard struct {
	id   string              // the campaign
	keys redisstore.Keys     // the shard's keys
	root redisstore.Snapshot // the campaign's root, for its spec
	kind *kind               // the campaign's kind
	// term is the term of the shard's part (PartHolder.Held), 0 without a
	// PartHolder: a new term sweeps the stream's pending entries (sweep).
	term int64
}

// names are the shard's stream and the kind of campaign, as the log
// names them.
func (sh shard) names() (stream, label string) { return sh.kind.stream, sh.kind.store.Name }

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// fundLedger writes the fund entry of c once per worker (the ledger makes
// repeats no-ops anyway).
func (w *Worker) fundLedger(ctx context.Context, c ledger.Campaign) error {
	id := c.ID
	w.mu.Lock()
	done := w.funded[id]
	w.mu.Unlock()
	if done {
		return nil
	}
	if err := w.sink.Fund(ctx, c); err != nil {
		return fmt.Errorf("fund: %w", err)
	}
	w.mu.Lock()
	w.funded[id] = true
	w.mu.Unlock()
	return nil
}

// settleEntries writes the grants of entries to the ledger and acknowledges
// them. Malformed entries go to the dead stream at once (nothing of theirs
// can be written); the rest is written in one transaction. If that
// transaction fails while the database is reachable, the batch is split in
// halves and retried, so that an entry at fault ends alone in the dead
// stream, if the ledger refuses it as invalid (ledger.ErrInvalid); if the
// database is not reachable, or a single entry fails for any other reason,
// the error is returned and that entry stays pending.
func (w *Worker) settleEntries(ctx context.Context, sh shard, es []redisstore.Entry) error {
	id := sh.id
	if err := w.syncReplicas(ctx, sh.keys); err != nil {
		return err
	}
	if err := w.fund(ctx, sh.kind, id, sh.root); err != nil {
		return err
	}
	good := es[:0:0]
	for _, e := range es {
		switch {
		case e.Deleted:
			// Pending but gone from the stream: nothing left to read. The
			// alarm is raised; acknowledging stops it from repeating.
			w.tell(&w.deleted, hongbao.SettleDeleted, id, 1, nil)
			w.log.Error("ALARM: pending grants entry was deleted before settling", "campaign", id, "entry", e.ID)
			if err := w.store.Ack(ctx, sh.keys, e.ID); err != nil {
				return err
			}
		case e.Err != nil:
			w.tell(&w.malformed, hongbao.SettleMalformed, id, 1, nil)
			w.log.Error("malformed grants entry moved to the dead stream", "campaign", id, "entry", e.ID, "err", e.Err)
			if err := w.store.Dead(ctx, sh.keys, e.ID, "malformed: "+e.Err.Error(), e.Raw); err != nil {
				return err
			}
		default:
			good = append(good, e)
		}
	}
	ctx, span := w.batchSpan(ctx, sh, good)
	err := w.apply(ctx, sh, good)
	endSpan(span, err)
	return err
}

// apply writes the items of entries es to the sink in one transaction
// and acknowledges the entries after the commit, as the shard's kind
// does: grants in applyGrants, a discount campaign's confirmed discounts
// in applyDiscounts.
func (w *Worker) apply(ctx context.Context, sh shard, es []redisstore.Entry) error {
	if len(es) == 0 {
		return nil
	}
	return sh.kind.apply(w, ctx, sh, es)
}

// applyGrants is apply for a red packet campaign's grants.
func (w *Worker) applyGrants(ctx context.Context, sh shard, es []redisstore.Entry) error {
	id := sh.id
	n := 0
	for _, e := range es {
		n += len(e.Grants)
	}
	grants := make([]ledger.Grant, 0, n)
	for _, e := range es {
		// g.At is Redis' clock when grab.lua granted it (the entry's id,
		// or the time a redriven or rebuilt grant carries): the grant's
		// time, as the grab's answer reported it.
		for _, g := range e.Grants {
			grants = append(grants, ledger.Grant{Campaign: id, Seq: g.Seq, User: g.User, Cents: g.Cents, GrantedAt: g.At})
		}
	}
	lctx, span := w.ledgerSpan(ctx, "ledger.apply_grants", len(grants))
	res, err := w.sink.ApplyGrants(fenced(lctx, sh.root), id, grants)
	endSpan(span, err)
	if err != nil {
		return w.applyFailed(ctx, sh, es, err)
	}
	w.tell(&w.grants, hongbao.SettleGrants, id, int64(res.Inserted), nil)
	w.tell(&w.replayed, hongbao.SettleReplayed, id, int64(res.Replayed), nil)

	// Conflicts are incidents: each goes to the dead stream with its
	// entry's acknowledgement; entries without conflicts are acknowledged.
	bad := map[string][]redisstore.DeadGrant{}
	for _, c := range res.Conflicts {
		w.tell(&w.conflicts, hongbao.SettleConflict, id, 1, nil)
		w.log.Error("INCIDENT: conflicting grant", "campaign", id, "kind", c.Kind,
			"user", c.Grant.User, "seq", c.Grant.Seq, "cents", c.Grant.Cents,
			"existing_user", c.Existing.User, "existing_seq", c.Existing.Seq)
		entry := entryOf(es, func(g redisstore.StreamGrant) bool { return g.Seq == c.Grant.Seq && g.User == c.Grant.User })
		bad[entry] = append(bad[entry], redisstore.DeadGrant{User: c.Grant.User, Packet: redisstore.FormatPacket(c.Grant.Seq, c.Grant.Cents)})
	}
	return w.ackOrBury(ctx, sh, es, bad)
}

// entryOf is the id of the first entry with an item that is, else of the
// first entry.
func entryOf(es []redisstore.Entry, is func(redisstore.StreamGrant) bool) string {
	for _, e := range es {
		for _, g := range e.Grants {
			if is(g) {
				return e.ID
			}
		}
	}
	return es[0].ID
}

// fenced returns ctx carrying the ledger fence of the campaign whose root
// is root, as read before the entries to write (a rebuild that replaced
// the campaign in Redis since has raised the ledger's, and the ledger
// refuses the write: ledger.ErrFenced), and the owner it records (a
// ledger that is not it refuses the write: ledger.ErrForeign).
func fenced(ctx context.Context, root redisstore.Snapshot) context.Context {
	return owned(ledger.WithFence(ctx, root.Int(redisstore.LedgerFence)), root)
}

// applyFailed handles a failed write of entries: an outage keeps them
// pending, a batch is split in halves to find the entry at fault, and a
// single entry the ledger refuses as invalid goes to the dead stream.
// A batch fenced off by a rebuild stays pending: the pass fails, and the
// next one reads the campaign, its fence and its pending entries again.
func (w *Worker) applyFailed(ctx context.Context, sh shard, es []redisstore.Entry, err error) error {
	if ctx.Err() != nil || errors.Is(err, ledger.ErrFenced) || errors.Is(err, ledger.ErrForeign) {
		// A foreign refusal is the ledger's own check of what own()
		// decided: Config.Owner names another ledger than Config.Ledger.
		return err
	}
	if perr := w.sink.Ping(ctx); perr != nil {
		// An outage, not the entries' fault: keep them pending.
		return fmt.Errorf("ledger unavailable: %w", err)
	}
	if len(es) > 1 {
		half := len(es) / 2
		if err := w.apply(ctx, sh, es[:half]); err != nil {
			return err
		}
		return w.apply(ctx, sh, es[half:])
	}
	stream, label := sh.names()
	if errors.Is(err, ledger.ErrRefused) {
		// One entry the ledger refuses as impossible: a grant or a
		// discount after the campaign's refund, or beyond what its escrow
		// holds. Writing it would be money nobody funded; retrying will
		// not help. It goes to the dead stream (which holds the refund
		// back and raises the dead-entries alert) and is counted.
		w.tell(&w.refused, hongbao.SettleRefused, sh.id, 1, nil)
		w.log.Error("INCIDENT: the ledger refused "+stream+" entry as impossible; moved to the dead stream",
			label, sh.id, "entry", es[0].ID, "err", err)
		return w.store.Dead(ctx, sh.keys, es[0].ID, "refused: "+err.Error(), es[0].Raw)
	}
	if !errors.Is(err, ledger.ErrInvalid) {
		// The ledger answers, yet did not say that the entry can never
		// be written: a connection of its pool that broke, a lock
		// timeout, a host that refuses our credentials. Nothing of that
		// is the entry's fault: it stays pending and is tried again
		// after a pause.
		return fmt.Errorf("ledger failed on entry %s: %w", es[0].ID, err)
	}
	// One entry that the ledger refuses as invalid: its own fault.
	w.tell(&w.malformed, hongbao.SettleMalformed, sh.id, 1, nil)
	w.log.Error(stream+" entry refused by the ledger; moved to the dead stream", label, sh.id, "entry", es[0].ID, "err", err)
	return w.store.Dead(ctx, sh.keys, es[0].ID, "refused: "+err.Error(), es[0].Raw)
}

// ackOrBury acknowledges entries, moving those with conflicts (bad, by
// entry id: the conflicting items) to the dead stream with their
// acknowledgement.
func (w *Worker) ackOrBury(ctx context.Context, sh shard, es []redisstore.Entry, bad map[string][]redisstore.DeadGrant) error {
	var ack []string
	for _, e := range es {
		if items, ok := bad[e.ID]; ok {
			if err := w.store.Dead(ctx, sh.keys, e.ID, "conflict", items); err != nil {
				return err
			}
			w.entries.Add(1)
			continue
		}
		ack = append(ack, e.ID)
	}
	if err := w.store.Ack(ctx, sh.keys, ack...); err != nil {
		return err
	}
	w.entries.Add(int64(len(ack)))
	return nil
}

// syncReplicas waits, with Config.WaitReplicas, until the replicas hold
// every write of shard k's node so far.
func (w *Worker) syncReplicas(ctx context.Context, k redisstore.Keys) error {
	if w.cfg.WaitReplicas == 0 {
		return nil
	}
	if err := w.store.SyncReplicas(ctx, k, w.cfg.WaitReplicas, w.cfg.WaitTimeout); err != nil {
		return fmt.Errorf("settle only what the replicas hold: %w", err)
	}
	return nil
}

// refund settles a closed, drained campaign: the remaining cents go back
// to the funding account in the ledger (once: the ledger refuses a second,
// different refund), then Redis records the refund and the settled state,
// shard by shard, the root last. The ledger's grants must match Redis's
// counters first; if not, or if the ledger refuses the refund, the
// campaign stays unsettled, the difference is logged as an incident and
// noted in its dead stream (refuseRefund). Dead grants and transfers in
// flight between shards hold the refund back.
//
// The refund decides from what it reads itself, never from the pass's
// stream reads: every shard must be closed in the view read here and its
// stream, read after that view, fully delivered and acknowledged (see
// drained). A grant that landed on a shard still open while the pass read
// the streams is then either in that view's counters and on a stream
// read after it, or the shard was open and the refund waits. left counts
// the entries still to settle when the refund waits for them.
func (w *Worker) refund(ctx context.Context, k *kind, id string) (done bool, left int64, err error) {
	v, err := w.store.Read(ctx, id)
	if err != nil {
		return false, 0, err
	}
	if inFlight(v) {
		// Every shard is closed, so no engine takes packets any more:
		// whatever transfer is left was cut short. Finish it now.
		if _, err := w.store.Recover(ctx, v.Shards, 0); err != nil {
			return false, 0, err
		}
		if v, err = w.store.Read(ctx, id); err != nil {
			return false, 0, err
		}
	}
	root := v.Root()
	if err := w.fund(ctx, k, id, root); err != nil {
		return false, 0, err
	}
	var grantedCount, grantedCents int64
	for k, snap := range v.Snaps {
		if snap.Transfers > 0 {
			return false, 0, nil
		}
		// Dead grants wait for an operator (redrive); refunding now would
		// refund money that belongs to users.
		if n, err := w.drained(ctx, v.Shards[k], snap); n != 0 || err != nil {
			return false, max(n, 0), err
		}
		grantedCount += snap.Int("granted_count")
		grantedCents += snap.Int("granted_cents")
	}
	if ok, err := w.ledgerAgrees(ctx, v.Shards[0], k.store.Name, id, k.ledgerID(id), grantedCount, grantedCents); !ok || err != nil {
		return false, 0, err
	}
	for _, k := range v.Shards {
		if err := w.syncReplicas(ctx, k); err != nil {
			return false, 0, err
		}
	}
	refund := root.Int("total") - grantedCents
	if err := w.sink.Refund(fenced(ctx, root), k.ledgerID(id), refund); err != nil {
		return false, 0, w.refundFailed(ctx, v.Shards[0], k.store.Name, id, err)
	}
	w.wakeRollUp()
	changed, err := w.settleShards(ctx, v, refund)
	if err != nil {
		return false, 0, err
	}
	if changed {
		// Counted here, not after retire: a retire cut short (a stop, a
		// failed reconcile read) is done again by the next pass, which
		// finds the campaign settled and would not count it.
		w.tell(&w.refunds, hongbao.SettleRefund, id, 1, nil)
		w.log.Info("campaign settled", "campaign", id, "granted_cents", grantedCents, "refund_cents", refund)
	}
	if err := w.retire(ctx, v); err != nil {
		return false, 0, err
	}
	return true, 0, nil
}

// drained says how much of shard k still holds its refund back: -1 when
// the shard is not closed in snap, or when its dead stream holds entries
// (an operator's), else the entries of its stream not yet delivered or
// not yet acknowledged (0: the shard is done). The stream is read after
// snap, and a closed shard adds nothing to its stream (for a discount
// campaign: with no reservation held in snap, none can be confirmed), so
// 0 means that every entry the shard will ever have is settled.
func (w *Worker) drained(ctx context.Context, k redisstore.Keys, snap redisstore.Snapshot) (int64, error) {
	if st := snap.Meta["state"]; st != "closed" && st != "settled" {
		return -1, nil
	}
	g, err := w.store.Group(ctx, k)
	if err != nil {
		return -1, err
	}
	if g.Dead > 0 {
		return -1, nil
	}
	return g.Lag + g.Pending, nil
}

// inFlight reports whether a transfer between shards is in flight.
func inFlight(v *redisstore.View) bool {
	for _, snap := range v.Snaps {
		if snap.Transfers > 0 {
			return true
		}
	}
	return false
}

// ledgerAgrees checks, before the refund, that the ledger holds the
// grants (or discounts) Redis counts: always true for a sink without a
// ledger to read back. By then every shard is closed and its stream
// settled, so a difference is no lag but an incident: a refund that the
// ledger would refuse (see refuseRefund). label and id name the campaign
// in the log, lid in the ledger; root is its root shard.
func (w *Worker) ledgerAgrees(ctx context.Context, root redisstore.Keys, label, id, lid string, count, cents int64) (bool, error) {
	if w.cfg.Ledger == nil {
		return true, nil
	}
	t, err := w.cfg.Ledger.Totals(ctx, lid)
	if err != nil {
		return false, err
	}
	if t.GrantCount != count || t.GrantCents != cents {
		return false, w.refuseRefund(ctx, root, label, id, fmt.Sprintf(
			"outstanding: Redis counts %d entries, %d cents; the ledger holds %d, %d cents",
			count, cents, t.GrantCount, t.GrantCents))
	}
	return true, nil
}

// refundFailed handles a refund the sink did not record: one it refused
// as impossible becomes an incident (refuseRefund), anything else an
// error, and the next pass tries again.
func (w *Worker) refundFailed(ctx context.Context, root redisstore.Keys, label, id string, err error) error {
	if errors.Is(err, ledger.ErrRefused) {
		return w.refuseRefund(ctx, root, label, id, err.Error())
	}
	return fmt.Errorf("refund: %w", err)
}

// refuseRefund records a refund that the ledger refuses, or would refuse,
// as an incident: counted, logged, and noted in the dead stream of the
// campaign's root shard. The note holds the refund back, and raises the
// dead-entries alert, until an operator finds the cause and redrives the
// campaign (which deletes the note, so the refund is tried again); without
// it the worker would try and log the refund on every pass.
func (w *Worker) refuseRefund(ctx context.Context, root redisstore.Keys, label, id, reason string) error {
	w.tell(&w.refused, hongbao.SettleRefused, id, 1, nil)
	w.log.Error("INCIDENT: refund refused; campaign left unsettled, noted in its dead stream", label, id, "reason", reason)
	return w.store.DeadNote(ctx, root, "refund refused: "+reason)
}

// settleShards records the refund in Redis: a one-shard campaign takes it
// whole; each shard of a sharded one takes what its pool holds, the root
// last, so the campaign reads settled only once every shard is. changed is
// true when the root changed now.
func (w *Worker) settleShards(ctx context.Context, v *redisstore.View, refund int64) (bool, error) {
	if len(v.Shards) == 1 {
		return w.store.Settle(ctx, v.Shards[0], refund)
	}
	var sum int64
	for _, snap := range v.Snaps {
		sum += snap.Int("base_cents") + snap.Int("in_cents") - snap.Int("out_cents") - snap.Int("granted_cents")
	}
	if sum != refund {
		return false, fmt.Errorf("campaign %s: %w: its shards hold %d cents, the refund is %d", v.ID, redisstore.ErrCorrupt, sum, refund)
	}
	changed := false
	for k := len(v.Shards) - 1; k >= 0; k-- {
		snap := v.Snaps[k]
		part := snap.Int("base_cents") + snap.Int("in_cents") - snap.Int("out_cents") - snap.Int("granted_cents")
		c, err := w.store.Settle(ctx, v.Shards[k], part)
		if err != nil {
			return false, err
		}
		changed = c
	}
	return changed, nil
}

// retire takes a settled campaign out of the registry. Its keys expire
// after the retention only once a reconcile against the ledger finds no
// difference; otherwise they are kept, without expiry, for an operator,
// and the incident is logged. Without a ledger to read back (a webhook
// sink) there is nothing to reconcile against, and the retention applies.
func (w *Worker) retire(ctx context.Context, v *redisstore.View) error {
	retention := w.cfg.Retention
	if w.cfg.Ledger != nil {
		rep, err := w.Reconcile(ctx, v.ID)
		if err != nil {
			return err
		}
		if !rep.OK {
			w.log.Error("INCIDENT: settled campaign does not reconcile; its Redis keys are kept without expiry",
				"campaign", v.ID, "differences", rep.Differences)
			retention = -1
		}
	}
	return w.store.Unregister(ctx, redisstore.RedPacket, v.ID, v.Shards, retention)
}
