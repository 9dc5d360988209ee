package settle

import (
	"context"
	"errors"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// ReconcileDiscount compares discount campaign id in Redis (its
// reservation records, counters, pools, compensation, transfers in flight
// and streams) with the ledger (its discounts, fund, refund and escrow),
// discount by discount, and checks conservation from contents. The Report
// speaks of grants for confirmed discounts; TotalCents is the budget and
// PoolCents what is left (pools, compensation, transfers in flight). It
// reads in pages; run it on a closed campaign. namespace as for
// Reconcile.
func ReconcileDiscount(ctx context.Context, rc rueidis.Client, namespace string, l ledger.Ledger, id string) (*Report, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return nil, err
	}
	return reconcileDiscount(ctx, store, l, id)
}

// ReconcileDiscount is ReconcileDiscount with the worker's Redis and
// ledger.
func (w *Worker) ReconcileDiscount(ctx context.Context, id string) (*Report, error) {
	if w.cfg.Ledger == nil {
		return nil, errors.New("settle: reconcile needs a ledger, not a sink")
	}
	return reconcileDiscount(ctx, w.store, w.cfg.Ledger, id)
}

// confirmedDiscount is a confirmed discount as Redis holds it.
type confirmedDiscount struct{ seq, cents int64 }

// discountReconciler holds one reconciliation's state.
type discountReconciler struct {
	store     *redisstore.Store
	l         ledger.Ledger
	v         *redisstore.DiscountView
	r         *Report
	confirmed map[string]confirmedDiscount // order key -> discount, over all shards
	pooled    int64                        // amounts in the pools and in flight
}

func reconcileDiscount(ctx context.Context, store *redisstore.Store, l ledger.Ledger, id string) (*Report, error) {
	v, err := store.ReadDiscount(ctx, id)
	if err != nil {
		return nil, err
	}
	root := v.Root()
	r := &Report{Campaign: id, State: root.Meta["state"], TotalCents: root.Int("budget"), Differences: []string{}}
	rc := &discountReconciler{store: store, l: l, v: v, r: r, confirmed: map[string]confirmedDiscount{}}
	for _, step := range []func(context.Context) error{rc.records, rc.pools, rc.ledgerDiscounts, rc.totals, rc.streams} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	r.OK = r.DifferenceCount == 0
	return r, nil
}

// records reads every shard's reservation records: the confirmed ones
// against the counters, the held ones for conservation.
func (rc *discountReconciler) records(ctx context.Context) error {
	r := rc.r
	var count, cents int64
	for k, keys := range rc.v.Shards {
		snap := rc.v.Snaps[k]
		count += snap.Int("confirmed_count")
		cents += snap.Int("confirmed_cents")
		r.RefundRedisCents += snap.Int("refunded_cents")
		r.CompensationCents += snap.Int("comp_cents")
		err := rc.store.ScanReservations(ctx, keys, func(key string, res redisstore.Reservation) error {
			switch res.State {
			case 'c':
				rc.confirmed[key] = confirmedDiscount{res.Seq, res.Cents}
				r.GrantedRedis++
				r.GrantedCentsRedis += res.Cents
			case 'r':
				r.ReservedCents += res.Cents
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if count != r.GrantedRedis || cents != r.GrantedCentsRedis {
		r.summary("Redis counters say %d confirmed, %d cents; the records hold %d, %d cents", count, cents, r.GrantedRedis, r.GrantedCentsRedis)
	}
	return nil
}

// pools sums the amounts in the pools and in transfers not yet applied.
func (rc *discountReconciler) pools(ctx context.Context) error {
	seen := func(_, cents int64) {
		rc.pooled++
		rc.r.PoolCents += cents
	}
	views := redisstore.ShardViews(rc.v.Shards)
	for k, keys := range views {
		if err := rc.store.ScanPool(ctx, keys, func(seq, cents int64) error { seen(seq, cents); return nil }); err != nil {
			return err
		}
		if err := inTransfer(ctx, rc.store, views, rc.v.Snaps, k, rc.r, seen); err != nil {
			return err
		}
	}
	rc.r.PoolCents += rc.r.CompensationCents
	return nil
}

// ledgerDiscounts compares the ledger's discounts with the confirmed
// records, one by one.
func (rc *discountReconciler) ledgerDiscounts(ctx context.Context) error {
	r := rc.r
	seen := map[string]bool{}
	err := rc.l.Discounts(ctx, ledger.DiscountCampaign(r.Campaign), func(d ledger.Discount) error {
		r.GrantedLedger++
		r.GrantedCentsLedger += d.Cents
		key := redisstore.OrderKey(d.User, d.Order)
		seen[key] = true
		c, ok := rc.confirmed[key]
		switch {
		case !ok:
			r.diff("extra in the ledger: %s holds unit %d (%d cents), Redis has no confirmed discount", key, d.Seq, d.Cents)
		case c.seq != d.Seq || c.cents != d.Cents:
			r.diff("mismatch for %s: Redis unit %d/%d cents, ledger %d/%d cents", key, c.seq, c.cents, d.Seq, d.Cents)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for key, c := range rc.confirmed {
		if !seen[key] {
			r.diff("missing from the ledger: %s unit %d (%d cents)", key, c.seq, c.cents)
		}
	}
	return nil
}

// totals compares the ledger's balances with the campaign and checks
// conservation in Redis.
func (rc *discountReconciler) totals(ctx context.Context) error {
	r := rc.r
	t, err := rc.l.Totals(ctx, ledger.DiscountCampaign(r.Campaign))
	if err != nil {
		return err
	}
	r.FundCents, r.RefundCents, r.EscrowCents = t.Funded, t.Refunded, t.Escrow
	if t.Funded != r.TotalCents {
		r.summary("fund entry is %d cents, the budget is %d", t.Funded, r.TotalCents)
	}
	if t.GrantCount != r.GrantedLedger || t.GrantCents != r.GrantedCentsLedger {
		r.summary("ledger totals say %d discounts, %d cents; its rows hold %d, %d", t.GrantCount, t.GrantCents, r.GrantedLedger, r.GrantedCentsLedger)
	}
	if t.Escrow != t.Funded-t.GrantCents-t.Refunded {
		r.summary("escrow balance %d != funded %d - discounts %d - refunded %d", t.Escrow, t.Funded, t.GrantCents, t.Refunded)
	}
	if sum := r.GrantedCentsRedis + r.ReservedCents + r.PoolCents + r.RefundRedisCents; sum != r.TotalCents {
		r.summary("conservation in Redis: confirmed %d + reserved %d + left %d + refunded %d != budget %d",
			r.GrantedCentsRedis, r.ReservedCents, r.PoolCents, r.RefundRedisCents, r.TotalCents)
	}
	if r.State == "settled" {
		if !t.RefundDone || t.Refunded != r.RefundRedisCents {
			r.summary("refund: ledger %d cents (recorded %v), Redis %d", t.Refunded, t.RefundDone, r.RefundRedisCents)
		}
		if t.Escrow != 0 {
			r.summary("settled, yet escrow holds %d cents", t.Escrow)
		}
		if rc.pooled != 0 || r.ReservedCents != 0 {
			r.summary("settled, yet %d amounts are in the pools and %d cents reserved", rc.pooled, r.ReservedCents)
		}
	}
	return nil
}

// streams counts what settlement has left on every shard's stream.
func (rc *discountReconciler) streams(ctx context.Context) error {
	return countStreams(ctx, rc.store, redisstore.ShardViews(rc.v.Shards), rc.r, "confirms")
}
