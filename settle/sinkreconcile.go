package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// TotalsSink is a sink that can say what it holds of a campaign. A sink
// that is not the built-in ledger cannot be read grant by grant, as
// Reconcile reads the ledger; its totals are what a host's wallet can be
// checked by. webhook.Sink asks its host (a "totals" event);
// ledger.Ledger is one too.
type TotalsSink interface {
	// Totals returns what the sink holds of campaign: Funded, Funding,
	// GrantCount, GrantCents, Refunded, RefundDone and Escrow are read;
	// an unknown campaign is zero Totals and no error. A sink that
	// checks owners (ledger.WithOwner) refuses another's campaign with
	// ledger.ErrForeign.
	Totals(ctx context.Context, campaign string) (ledger.Totals, error)
}

// SinkCounts is what Redis says of a campaign, summed over its shards:
// what a sink should hold of it once it is settled. ReconcileSink reads
// it; CompareSink takes it from any source.
type SinkCounts struct {
	// Campaign is the campaign's id in Redis.
	Campaign string
	// SinkCampaign is the id the sink knows the campaign by: Campaign for
	// a red packet campaign, ledger.DiscountCampaign(Campaign) for a
	// discount campaign. Empty means Campaign.
	SinkCampaign string
	// State is the root shard's state ("open", "closed", "settled"...).
	State string
	// Owner is the identity the campaign recorded at create as what it
	// settles into; "" for a campaign that recorded none.
	Owner string
	// Funding is the campaign's funding account.
	Funding string
	// TotalCents is the campaign's total (a discount campaign's budget).
	TotalCents int64
	// GrantedCount and GrantedCents count the grants (a discount
	// campaign's confirmed discounts) Redis made.
	GrantedCount, GrantedCents int64
	// RefundedCents is the refund Redis recorded (0 before the refund).
	RefundedCents int64
	// Unsettled counts the stream entries not yet delivered to the sink
	// and acknowledged; Dead the entries in the dead streams.
	Unsettled, Dead int64
}

// ReconcileSink compares red packet campaign id in Redis with what sink
// holds of it (CompareSink): for a sink with no ledger to read grant by
// grant, such as a host's wallet behind package webhook. It reads only
// the campaign's counters and stream groups, O(shards), so it can run
// often; Reconcile, on a ledger, reads every claim and grant.
func ReconcileSink(ctx context.Context, rc rueidis.Client, namespace string, sink TotalsSink, id string) (*Report, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return nil, err
	}
	c, err := readSinkCounts(ctx, store, id)
	if err != nil {
		return nil, err
	}
	return CompareSink(ctx, sink, c)
}

// ReconcileSinkDiscount is ReconcileSink for discount campaign id: its
// confirmed discounts are the grants, its budget the total, and the sink
// is asked about ledger.DiscountCampaign(id).
func ReconcileSinkDiscount(ctx context.Context, rc rueidis.Client, namespace string, sink TotalsSink, id string) (*Report, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return nil, err
	}
	c, err := readSinkDiscountCounts(ctx, store, id)
	if err != nil {
		return nil, err
	}
	return CompareSink(ctx, sink, c)
}

// readSinkCounts reads red packet campaign id's counters and stream
// groups: all of Redis that a sink reconcile needs.
func readSinkCounts(ctx context.Context, store *redisstore.Store, id string) (SinkCounts, error) {
	v, err := store.Read(ctx, id)
	if err != nil {
		return SinkCounts{}, err
	}
	root := v.Root()
	c := SinkCounts{Campaign: id, State: root.Meta["state"], Owner: root.Meta[redisstore.OwnerField],
		Funding: root.Meta["funding"], TotalCents: root.Int("total")}
	for _, snap := range v.Snaps {
		c.GrantedCount += snap.Int("granted_count")
		c.GrantedCents += snap.Int("granted_cents")
		c.RefundedCents += snap.Int("refunded_cents")
	}
	return c, c.streams(ctx, store, v.Shards)
}

// readSinkDiscountCounts is readSinkCounts for a discount campaign.
func readSinkDiscountCounts(ctx context.Context, store *redisstore.Store, id string) (SinkCounts, error) {
	v, err := store.ReadDiscount(ctx, id)
	if err != nil {
		return SinkCounts{}, err
	}
	root := v.Root()
	c := SinkCounts{Campaign: id, SinkCampaign: ledger.DiscountCampaign(id), State: root.Meta["state"],
		Owner: root.Meta[redisstore.OwnerField], Funding: root.Meta["funding"], TotalCents: root.Int("budget")}
	for _, snap := range v.Snaps {
		c.GrantedCount += snap.Int("confirmed_count")
		c.GrantedCents += snap.Int("confirmed_cents")
		c.RefundedCents += snap.Int("refunded_cents")
	}
	return c, c.streams(ctx, store, redisstore.ShardViews(v.Shards))
}

// streams counts what settlement has left on the shards' streams.
func (c *SinkCounts) streams(ctx context.Context, store *redisstore.Store, shards []redisstore.Keys) error {
	for _, keys := range shards {
		g, err := store.Group(ctx, keys)
		if err != nil {
			return err
		}
		c.Unsettled += g.Lag + g.Pending
		c.Dead += g.Dead
	}
	return nil
}

// CompareSink compares what sink holds of a campaign with what Redis
// says of it (c), in a Report whose ledger fields (GrantedLedger,
// GrantedCentsLedger, FundCents, RefundCents, EscrowCents) hold the
// sink's numbers. It lists as differences: a fund other than the total,
// or from another funding account; a grant count or cents other than
// Redis's; once the campaign is settled, a refund missing or other than
// Redis's, an escrow left non-zero, and Redis counters that do not add up
// to the total; before, a refund the sink holds already; and what
// settlement has not delivered yet (unsettled and dead entries). Totals
// cannot say which grant is missing: a difference here is where to start
// looking, in the sink's records and the campaign's dead stream.
//
// A campaign that records an owner is the sink's only if the owner is the
// sink's identity: CompareSink asks a sink that has one (Identity, as
// webhook.Sink does) and passes the owner to Totals (ledger.WithOwner); a
// foreign campaign, either way, is one difference and nothing else is
// compared, since its money settles elsewhere. An error is returned only
// when the sink cannot be asked.
func CompareSink(ctx context.Context, sink TotalsSink, c SinkCounts) (*Report, error) {
	r := &Report{Campaign: c.Campaign, State: c.State, TotalCents: c.TotalCents,
		GrantedRedis: c.GrantedCount, GrantedCentsRedis: c.GrantedCents, RefundRedisCents: c.RefundedCents,
		Unsettled: c.Unsettled, Dead: c.Dead, Differences: []string{}}
	id := c.SinkCampaign
	if id == "" {
		id = c.Campaign
	}
	if c.Owner != "" {
		if is, ok := sink.(interface {
			Identity(context.Context) (string, error)
		}); ok {
			self, err := is.Identity(ctx)
			if err != nil {
				return nil, fmt.Errorf("settle: identity of the sink: %w", err)
			}
			if self != c.Owner {
				return foreign(r, c.Owner, self), nil
			}
		}
		ctx = ledger.WithOwner(ctx, c.Owner)
	}
	t, err := sink.Totals(ctx, id)
	var fe *ledger.ForeignError
	if errors.As(err, &fe) {
		return foreign(r, fe.Owner, fe.Ledger), nil
	}
	if err != nil {
		return nil, fmt.Errorf("settle: totals of campaign %s in the sink: %w", id, err)
	}
	r.GrantedLedger, r.GrantedCentsLedger = t.GrantCount, t.GrantCents
	r.FundCents, r.RefundCents, r.EscrowCents = t.Funded, t.Refunded, t.Escrow

	if t.Funded != c.TotalCents {
		r.summary("fund: the sink holds %d cents, the campaign total is %d", t.Funded, c.TotalCents)
	}
	if t.Funding != "" && c.Funding != "" && t.Funding != c.Funding {
		r.summary("fund: the sink's funding account is %q, the campaign's %q", t.Funding, c.Funding)
	}
	if t.GrantCount != c.GrantedCount || t.GrantCents != c.GrantedCents {
		r.summary("grants: Redis granted %d (%d cents), the sink holds %d (%d cents)",
			c.GrantedCount, c.GrantedCents, t.GrantCount, t.GrantCents)
	}
	if c.State == "settled" {
		if !t.RefundDone || t.Refunded != c.RefundedCents {
			r.summary("refund: the sink holds %d cents (recorded %v), Redis refunded %d", t.Refunded, t.RefundDone, c.RefundedCents)
		}
		if t.Escrow != 0 {
			r.summary("settled, yet the sink's escrow holds %d cents (funded %d - granted %d - refunded %d)",
				t.Escrow, t.Funded, t.GrantCents, t.Refunded)
		}
		if c.GrantedCents+c.RefundedCents != c.TotalCents {
			r.summary("Redis counters: granted %d + refunded %d != total %d", c.GrantedCents, c.RefundedCents, c.TotalCents)
		}
	} else if t.RefundDone {
		r.summary("the sink holds a refund of %d cents while the campaign is %s", t.Refunded, c.State)
	}
	if c.Unsettled > 0 {
		r.summary("%d stream entries are not settled yet", c.Unsettled)
	}
	if c.Dead > 0 {
		r.summary("%d entries in the dead stream wait for an operator", c.Dead)
	}
	r.OK = r.DifferenceCount == 0
	return r, nil
}

// foreign reports a campaign owned by another than the sink.
func foreign(r *Report, owner, self string) *Report {
	r.summary("the campaign is owned by %q, not by this sink (%q): it settles elsewhere", owner, self)
	r.OK = false
	return r
}
