package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Report compares one campaign in Redis with the ledger.
type Report struct {
	Campaign           string   `json:"campaign"`
	State              string   `json:"state"`
	TotalCents         int64    `json:"total_cents"`
	GrantedRedis       int64    `json:"granted_redis"`
	GrantedLedger      int64    `json:"granted_ledger"`
	GrantedCentsRedis  int64    `json:"granted_cents_redis"`
	GrantedCentsLedger int64    `json:"granted_cents_ledger"`
	PoolCents          int64    `json:"pool_cents"`
	FundCents          int64    `json:"fund_cents"`
	RefundCents        int64    `json:"refund_cents"`
	RefundRedisCents   int64    `json:"refund_redis_cents"`
	EscrowCents        int64    `json:"escrow_cents"`
	Unsettled          int64    `json:"unsettled_entries"`
	Dead               int64    `json:"dead"`
	Differences        []string `json:"differences"`
	DifferenceCount    int      `json:"difference_count"`
	OK                 bool     `json:"ok"`

	items int // grant-by-grant lines listed so far
}

// diff records a difference of one grant or packet; at most
// maxItemDifferences of them are listed (all are counted).
func (r *Report) diff(format string, a ...any) {
	r.DifferenceCount++
	if r.items < maxItemDifferences {
		r.items++
		r.Differences = append(r.Differences, fmt.Sprintf(format, a...))
	}
}

// summary records a difference of the campaign as a whole (counters,
// balances, conservation, unsettled and dead entries). Those are always
// listed, however many grant differences came before.
func (r *Report) summary(format string, a ...any) {
	r.DifferenceCount++
	r.Differences = append(r.Differences, fmt.Sprintf(format, a...))
}

// maxItemDifferences bounds the grant-by-grant lines of a report.
const maxItemDifferences = 100

// Reconcile compares campaign id in Redis (claims, counters, pool, stream,
// dead stream) with the ledger (grants, fund, refund, escrow), grant by
// grant, and checks conservation from contents, not only from counters.
// It reads in pages; run it on a closed campaign.
func Reconcile(ctx context.Context, rc rueidis.Client, l ledger.Ledger, id string) (*Report, error) {
	return reconcile(ctx, redisstore.New(rc), l, id)
}

// Reconcile is Reconcile with the worker's Redis and ledger (and its
// script flavour, for the emulator).
func (w *Worker) Reconcile(ctx context.Context, id string) (*Report, error) {
	if w.cfg.Ledger == nil {
		return nil, errors.New("settle: reconcile needs a ledger, not a sink")
	}
	return reconcile(ctx, w.store, w.cfg.Ledger, id)
}

func reconcile(ctx context.Context, store *redisstore.Store, l ledger.Ledger, id string) (*Report, error) {
	snap, err := store.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &Report{Campaign: id, State: snap.Meta["state"], TotalCents: atoi(snap.Meta["total"]), Differences: []string{}}
	r.RefundRedisCents = atoi(snap.Meta["refunded_cents"])

	type packet struct{ seq, cents int64 }
	claims := map[string]packet{}
	if err := store.ScanClaims(ctx, id, func(u string, seq, cents int64) error {
		claims[u] = packet{seq, cents}
		return nil
	}); err != nil {
		return nil, err
	}
	bySeq := map[int64]string{}
	for u, p := range claims {
		r.GrantedRedis++
		r.GrantedCentsRedis += p.cents
		if other, dup := bySeq[p.seq]; dup {
			r.diff("packet %d is claimed by %q and %q in Redis", p.seq, other, u)
		}
		bySeq[p.seq] = u
	}
	if c, cc := atoi(snap.Meta["granted_count"]), atoi(snap.Meta["granted_cents"]); c != r.GrantedRedis || cc != r.GrantedCentsRedis {
		r.summary("Redis counters say %d grants, %d cents; the claims hold %d, %d cents", c, cc, r.GrantedRedis, r.GrantedCentsRedis)
	}
	var poolCount int64
	if err := store.ScanPool(ctx, id, func(seq, cents int64) error {
		poolCount++
		r.PoolCents += cents
		if u, ok := bySeq[seq]; ok {
			r.diff("packet %d is in the pool and claimed by %q", seq, u)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	seen := map[string]bool{}
	if err := l.Grants(ctx, id, func(g ledger.Grant) error {
		r.GrantedLedger++
		r.GrantedCentsLedger += g.Cents
		seen[g.User] = true
		p, ok := claims[g.User]
		switch {
		case !ok:
			r.diff("extra in the ledger: %q holds packet %d (%d cents), Redis has no claim", g.User, g.Seq, g.Cents)
		case p.seq != g.Seq || p.cents != g.Cents:
			r.diff("amount mismatch for %q: Redis packet %d/%d cents, ledger %d/%d cents", g.User, p.seq, p.cents, g.Seq, g.Cents)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for u, p := range claims {
		if !seen[u] {
			r.diff("missing from the ledger: %q packet %d (%d cents)", u, p.seq, p.cents)
		}
	}

	t, err := l.Totals(ctx, id)
	if err != nil {
		return nil, err
	}
	r.FundCents, r.RefundCents, r.EscrowCents = t.Funded, t.Refunded, t.Escrow
	if t.Funded != r.TotalCents {
		r.summary("fund entry is %d cents, the campaign total is %d", t.Funded, r.TotalCents)
	}
	if t.GrantCount != r.GrantedLedger || t.GrantCents != r.GrantedCentsLedger {
		r.summary("ledger totals say %d grants, %d cents; its rows hold %d, %d", t.GrantCount, t.GrantCents, r.GrantedLedger, r.GrantedCentsLedger)
	}
	if t.Escrow != t.Funded-t.GrantCents-t.Refunded {
		r.summary("escrow balance %d != funded %d - granted %d - refunded %d", t.Escrow, t.Funded, t.GrantCents, t.Refunded)
	}
	if r.GrantedCentsRedis+r.PoolCents+r.RefundRedisCents != r.TotalCents {
		r.summary("conservation in Redis: claims %d + pool %d + refunded %d != total %d",
			r.GrantedCentsRedis, r.PoolCents, r.RefundRedisCents, r.TotalCents)
	}
	if r.State == "settled" {
		if !t.RefundDone || t.Refunded != r.RefundRedisCents {
			r.summary("refund: ledger %d cents (recorded %v), Redis %d", t.Refunded, t.RefundDone, r.RefundRedisCents)
		}
		if t.Escrow != 0 {
			r.summary("settled, yet escrow holds %d cents", t.Escrow)
		}
		if poolCount != 0 {
			r.summary("settled, yet %d packets are still in the pool", poolCount)
		}
	} else if t.RefundDone && t.Refunded+r.GrantedCentsLedger != r.TotalCents {
		r.summary("ledger refunded %d cents while the campaign is %s", t.Refunded, r.State)
	}

	g, err := store.Group(ctx, id)
	if err != nil {
		return nil, err
	}
	r.Unsettled, r.Dead = g.Lag+g.Pending, g.Dead
	if r.Unsettled > 0 {
		r.summary("%d grants stream entries are not settled yet", r.Unsettled)
	}
	if g.Dead > 0 {
		r.summary("%d entries in the dead stream wait for an operator", g.Dead)
	}
	r.OK = r.DifferenceCount == 0
	return r, nil
}
