package hongbao

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// DiscountAudit is a discount campaign recomputed from its contents in
// Redis (pools, transfers in flight, reservation records, usage, holds)
// and compared with its counters, its spec and its invariants.
type DiscountAudit struct {
	Status *DiscountStatus
	// PoolCount and PoolCents are what the pools hold, read entry by
	// entry (0 for a settled shard, whose pool is gone).
	PoolCount, PoolCents int64
	// InFlightCount and InFlightCents are in transfer records not yet
	// applied.
	InFlightCount, InFlightCents int64
	// CompensationCents is the shards' compensation.
	CompensationCents int64
	// Reserved*, Confirmed*: the records in those states.
	ReservedCount, ReservedCents   int64
	ConfirmedCount, ConfirmedCents int64
	// CancelledCount and ExpiredCount count records of released orders.
	CancelledCount, ExpiredCount int64
	// Users counts users holding discounts (confirmed or reserved).
	Users int
	// OverLimitUsers counts users above PerUserCount or PerUserAmount;
	// OverOrder discounts above their order amount; OverMax discounts
	// above Max. All 0 in a healthy campaign.
	OverLimitUsers, OverOrder, OverMax int64
	// Problems lists the differences found (at most 20; ProblemCount
	// counts all).
	Problems     []string
	ProblemCount int
	// OK is true when nothing differs.
	OK bool
}

func (a *DiscountAudit) problem(format string, args ...any) {
	a.ProblemCount++
	if len(a.Problems) < 20 {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

// Audit reads a discount campaign's contents in pages and checks
// them: every unit of quota in exactly one place (a pool, a transfer in
// flight, a held or confirmed reservation), the budget to the cent, the
// counters against the contents, each user's usage against its records
// and its limits, each discount against its order amount and Max, the
// holds against the held reservations. It is not atomic: run it on a
// campaign nobody is using (closed, or between tests' phases).
func (ds Discounts) Audit(ctx context.Context, id string) (*DiscountAudit, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	v, err := ds.e.store.ReadDiscount(ctx, id)
	if err != nil {
		return nil, opErr("audit discount", id, mapStoreErr(err))
	}
	st, err := discountStatusFrom(id, v)
	if err != nil {
		return nil, err
	}
	au := &discountAuditor{e: ds.e, v: v, a: &DiscountAudit{Status: st}, seqs: make([]uint8, st.Quota+1)}
	for k := range v.Shards {
		if err := au.shard(ctx, k); err != nil {
			return nil, opErr("audit discount", id, err)
		}
	}
	au.totals()
	au.a.OK = au.a.ProblemCount == 0
	return au.a, nil
}

// discountAuditor holds one audit's state.
type discountAuditor struct {
	e       *Engine
	v       *redisstore.DiscountView
	a       *DiscountAudit
	seqs    []uint8 // seq -> times seen holding a unit
	settled int64   // units left on settled shards (their pools are gone)
}

// unit records one place that holds seq.
func (au *discountAuditor) unit(seq int64, where string) {
	if seq < 1 || seq >= int64(len(au.seqs)) {
		au.a.problem("%s holds unit %d, outside 1..%d", where, seq, len(au.seqs)-1)
		return
	}
	if au.seqs[seq] == 1 {
		au.a.problem("unit %d is in two places (one of them %s)", seq, where)
	}
	au.seqs[seq]++
}

// shard audits shard k: its pool, its transfers out, its records and
// usage, and its counters.
func (au *discountAuditor) shard(ctx context.Context, k int) error {
	keys, snap := au.v.Shards[k], au.v.Snaps[k]
	settled := snap.Meta["state"] == string(StateSettled)
	var poolCount, poolCents int64
	err := au.e.store.ScanPool(ctx, keys.Keys(), func(seq, cents int64) error {
		poolCount++
		poolCents += cents
		au.unit(seq, fmt.Sprintf("the pool of shard %d", k))
		if cents > au.a.Status.Max {
			au.a.problem("shard %d: pool entry %d of %d cents is above max %d", k, seq, cents, au.a.Status.Max)
		}
		return nil
	})
	if err != nil {
		return err
	}
	au.a.PoolCount += poolCount
	au.a.PoolCents += poolCents
	au.a.CompensationCents += snap.Int("comp_cents")
	if settled {
		au.settled += snap.Int("base_count") + snap.Int("in_count") - snap.Int("out_count") - snap.Int("confirmed_count")
	} else if want := snap.Int("base_cents") + snap.Int("in_cents") - snap.Int("out_cents") - snap.Int("taken_cents") + snap.Int("returned_cents"); want != poolCents || poolCount != snap.PoolLen {
		au.a.problem("shard %d: the counters say the pool holds %d cents, it holds %d in %d entries", k, want, poolCents, poolCount)
	}
	if err := au.transfers(ctx, k); err != nil {
		return err
	}
	return au.records(ctx, k)
}

// transfers counts the amounts in transfer records out of shard k not yet
// applied at their destination.
func (au *discountAuditor) transfers(ctx context.Context, k int) error {
	if au.v.Snaps[k].Transfers == 0 {
		return nil
	}
	views := redisstore.ShardViews(au.v.Shards)
	ts, err := au.e.store.Transfers(ctx, views[k])
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Dest < 0 || t.Dest >= len(views) {
			au.a.problem("transfer %s goes to shard %d of %d", t.ID, t.Dest, len(views))
			continue
		}
		done, err := au.e.store.Applied(ctx, views[t.Dest], []string{t.ID})
		if err != nil {
			return err
		}
		if done[0] {
			continue
		}
		for _, p := range t.Packets {
			seq, cents, err := redisstore.ParseClaim(p)
			if err != nil {
				return err
			}
			au.a.InFlightCount++
			au.a.InFlightCents += cents
			au.unit(seq, "transfer "+t.ID)
		}
	}
	return nil
}

// use is one user's discounts on its home shard, from its records.
type usage struct{ count, cents int64 }

// records reads shard k's reservation records and compares them with its
// counters, its usage hash and its holds.
func (au *discountAuditor) records(ctx context.Context, k int) error {
	keys, snap, st := au.v.Shards[k], au.v.Snaps[k], au.a.Status
	uses := map[string]usage{}
	held := map[string]int64{}
	var rc, rs, cc, cs int64
	err := au.e.store.ScanReservations(ctx, keys, func(key string, r redisstore.Reservation) error {
		user, _, ok := redisstore.SplitOrderKey(key)
		if !ok {
			au.a.problem("shard %d: reservation key %q", k, key)
			return nil
		}
		if HomeShard(user, len(au.v.Shards)) != k {
			au.a.problem("shard %d holds a reservation of %q, whose home is another shard", k, user)
		}
		switch r.State {
		case 'x':
			au.a.CancelledCount++
			return nil
		case 'e':
			au.a.ExpiredCount++
			return nil
		case 'r':
			rc, rs = rc+1, rs+r.Cents
			held[key] = r.ExpiresMs
		default:
			cc, cs = cc+1, cs+r.Cents
		}
		au.unit(r.Seq, "the reservation of "+key)
		u := uses[user]
		uses[user] = usage{u.count + 1, u.cents + r.Cents}
		if r.Cents > r.OrderCents {
			au.a.OverOrder++
			au.a.problem("%s: a discount of %d cents on an order of %d", key, r.Cents, r.OrderCents)
		}
		if r.Cents > st.Max {
			au.a.OverMax++
			au.a.problem("%s: a discount of %d cents, above max %d", key, r.Cents, st.Max)
		}
		return nil
	})
	if err != nil {
		return err
	}
	au.a.ReservedCount += rc
	au.a.ReservedCents += rs
	au.a.ConfirmedCount += cc
	au.a.ConfirmedCents += cs
	if rc != snap.Int("reserved_count") || rs != snap.Int("reserved_cents") || cc != snap.Int("confirmed_count") || cs != snap.Int("confirmed_cents") {
		au.a.problem("shard %d: counters say %d reserved (%d cents), %d confirmed (%d cents); the records hold %d (%d), %d (%d)",
			k, snap.Int("reserved_count"), snap.Int("reserved_cents"), snap.Int("confirmed_count"), snap.Int("confirmed_cents"), rc, rs, cc, cs)
	}
	if err := au.usage(ctx, k, uses); err != nil {
		return err
	}
	return au.holds(ctx, k, held)
}

// usage compares shard k's usage hash with the users' records, and the
// records with the limits.
func (au *discountAuditor) usage(ctx context.Context, k int, uses map[string]usage) error {
	st := au.a.Status
	for user, u := range uses {
		if (st.PerUserCount > 0 && u.count > int64(st.PerUserCount)) || (st.PerUserAmount > 0 && u.cents > st.PerUserAmount) {
			au.a.OverLimitUsers++
			au.a.problem("user %q holds %d discounts, %d cents: above the limits", user, u.count, u.cents)
		}
	}
	au.a.Users += len(uses)
	seen := 0
	err := au.e.store.ScanUsage(ctx, au.v.Shards[k], func(user string, count, cents int64) error {
		seen++
		if u := uses[user]; u.count != count || u.cents != cents {
			au.a.problem("shard %d: usage of %q is %d, %d cents; its records hold %d, %d cents", k, user, count, cents, u.count, u.cents)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(uses) {
		au.a.problem("shard %d: %d users have usage, %d hold discounts", k, seen, len(uses))
	}
	return nil
}

// holds checks that every held reservation of shard k has its hold in
// the holds list, with its expiry (holds of orders confirmed or cancelled
// since stay there until the reaper takes them off).
func (au *discountAuditor) holds(ctx context.Context, k int, held map[string]int64) error {
	found := 0
	err := au.e.store.ScanHolds(ctx, au.v.Shards[k], func(key string, ms int64) error {
		if exp, ok := held[key]; ok && exp == ms {
			found++
			delete(held, key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for key := range held {
		au.a.problem("shard %d: the reservation of %q has no hold: the reaper would never expire it", k, key)
	}
	return nil
}

// totals checks conservation over the whole campaign.
func (au *discountAuditor) totals() {
	a, st := au.a, au.a.Status
	cents := a.PoolCents + a.InFlightCents + a.CompensationCents + a.ReservedCents + a.ConfirmedCents + st.RefundedCents
	if cents != st.Budget {
		a.problem("conservation: pool %d + in flight %d + compensation %d + reserved %d + confirmed %d + refunded %d = %d cents, the budget is %d",
			a.PoolCents, a.InFlightCents, a.CompensationCents, a.ReservedCents, a.ConfirmedCents, st.RefundedCents, cents, st.Budget)
	}
	units := a.PoolCount + a.InFlightCount + a.ReservedCount + a.ConfirmedCount + au.settled
	if units != int64(st.Quota) {
		a.problem("conservation: %d units in pools, transfers and reservations (and %d left on settled shards), the quota is %d",
			units, au.settled, st.Quota)
	}
	if au.settled == 0 {
		for seq := 1; seq < len(au.seqs); seq++ {
			if au.seqs[seq] == 0 {
				a.problem("unit %d is nowhere", seq)
			}
		}
	}
	if st.ConfirmedCents+st.ReservedCents+st.RemainingCents != st.Budget ||
		st.ConfirmedCount+st.ReservedCount+st.RemainingCount != int64(st.Quota) {
		a.problem("status: confirmed %d + reserved %d + remaining %d cents (%d + %d + %d units) is not the budget %d (quota %d)",
			st.ConfirmedCents, st.ReservedCents, st.RemainingCents, st.ConfirmedCount, st.ReservedCount, st.RemainingCount, st.Budget, st.Quota)
	}
}
