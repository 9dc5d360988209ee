package hongbao

import (
	"context"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// kind is a kind of campaign as the engine serves it: red packet
// campaigns (kindRedPacket) and discount campaigns (kindDiscount). What
// the engine does alike for both (registering, pausing, blocking, owner
// changes) takes one and asks it for what differs; a kind is a value, not
// a flag to branch on, so a new kind is a new value with its own keys
// (redisstore.Kind) and readers.
type kind struct {
	store *redisstore.Kind // registry, hash tags and keys
	// shards reads the layout of live campaign id of the kind: its
	// shards' keys, the root first. redisstore.ErrNoCampaign when there is
	// none, or it is still loading.
	shards func(e *Engine, ctx context.Context, id string) ([]redisstore.Keys, error)
	// recordOwner records a new owner of campaign id where the kind keeps
	// its terms outside Redis too (a red packet campaign's, in the
	// ledger's terms, so a rebuild restores it); nil when its terms are
	// its meta alone.
	recordOwner func(e *Engine, ctx context.Context, op, id, owner string) error
}

// The kinds of campaign.
var (
	kindRedPacket = &kind{store: redisstore.RedPacket, shards: (*Engine).campaignShards, recordOwner: (*Engine).ownerInTerms}
	kindDiscount  = &kind{store: redisstore.Discount, shards: (*Engine).discountShards}
)

// root is the keys of the root shard of campaign id of kind k.
func (e *Engine) root(k *kind, id string) redisstore.Keys { return e.store.NS().RootKeys(k.store, id) }

// campaignShards reads the layout of red packet campaign id.
func (e *Engine) campaignShards(ctx context.Context, id string) ([]redisstore.Keys, error) {
	r, _, err := e.read(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.keys, nil
}

// discountShards reads the layout of discount campaign id.
func (e *Engine) discountShards(ctx context.Context, id string) ([]redisstore.Keys, error) {
	v, err := e.store.ReadDiscount(ctx, id)
	if err != nil {
		return nil, err
	}
	if m := v.Root().Meta; m["state"] == string(StateLoading) || m["kind"] != "discount" {
		return nil, redisstore.ErrNoCampaign
	}
	e.discounts.learn(id, len(v.Shards))
	return redisstore.ShardViews(v.Shards), nil
}
