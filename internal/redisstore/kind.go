package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Kind is a kind of campaign as the store keeps it: the registry that
// lists its live campaigns, the hash tag of its roots, and the keys of
// its shards. Red packet campaigns (RedPacket) and discount campaigns
// (Discount) are its values; the calls that are the same for both (the
// registries, the layout, retirement) take one instead of being written
// twice. A new kind is a new value here, with the keys of its own.
type Kind struct {
	// Name is the kind's word in logs and errors: "campaign", "discount".
	Name  string
	index string                            // the registry's key in the namespace
	root  string                            // the root's hash tag is root + id
	all   func(prefix, tag string) []string // every key of one shard (All)
	view  func(prefix, tag string) Keys     // the shard as a campaign shard
}

// The kinds of campaign.
var (
	// RedPacket is a red packet campaign: hash tags {c:<id>}, registry
	// <ns>:campaigns.
	RedPacket = &Kind{Name: "campaign", index: "campaigns", root: "c:",
		all:  func(ns, tag string) []string { return keysOfTag(ns, tag).All() },
		view: keysOfTag}
	// Discount is a discount campaign: hash tags {d:<id>}, registry
	// <ns>:discounts.
	Discount = &Kind{Name: "discount", index: "discounts", root: "d:",
		all:  func(ns, tag string) []string { return discountKeysOfTag(ns, tag).All() },
		view: func(ns, tag string) Keys { return discountKeysOfTag(ns, tag).Keys() }}
)

// Kinds lists every kind, red packets first: the walkers of the
// registries (settlement, the metrics) go through them in this order.
func Kinds() []*Kind { return []*Kind{RedPacket, Discount} }

// RootTag is the hash tag of campaign id's root shard.
func (k *Kind) RootTag(id string) string { return k.root + id }

// All lists every key of shard s of a campaign of kind k (Keys.All,
// DiscountKeys.All), whichever view s is.
func (k *Kind) All(s Keys) []string { return k.all(s.prefix, s.Tag) }

// Index is the sorted set of the namespace's campaign ids of kind k by
// close time (ms), kept until a campaign is settled. Only Go writes it,
// never a campaign script (it lives in another slot).
func (n Namespace) Index(k *Kind) string { return n.prefix() + k.index }

// RootKeys are the keys of the root shard of campaign id of kind k, as a
// campaign shard (for a discount campaign, DiscountKeys.Keys).
func (n Namespace) RootKeys(k *Kind, id string) Keys { return k.view(n.prefix(), k.RootTag(id)) }

// LayoutOf returns the keys of every shard of campaign id of kind k with
// shards shards, as campaign shards, shard 0 first.
func (n Namespace) LayoutOf(k *Kind, id string, shards int) []Keys {
	out := make([]Keys, shards)
	for i := range out {
		out[i] = k.view(n.prefix(), ShardTagOf(k.RootTag(id), shards, i))
	}
	return out
}

// ReadOf reads campaign id of kind k: the root first, which says how many
// shards there are, then the others. ErrNoCampaign when the root does not
// exist.
func (s *Store) ReadOf(ctx context.Context, k *Kind, id string) (*View, error) {
	rk := s.ns.RootKeys(k, id)
	root, err := s.Status(ctx, rk)
	if err != nil {
		return nil, err
	}
	n := int(root.Int("shards"))
	if n <= 1 {
		return &View{ID: id, Shards: []Keys{rk}, Snaps: []Snapshot{root}}, nil
	}
	if n > MaxShards {
		return nil, fmt.Errorf("%s %s: %w: %d shards", k.Name, id, ErrCorrupt, n)
	}
	layout := s.ns.LayoutOf(k, id, n)
	rest, err := s.StatusAll(ctx, layout[1:])
	if err != nil {
		return nil, err
	}
	return &View{ID: id, Shards: layout, Snaps: append([]Snapshot{root}, rest...)}, nil
}

// Register adds campaign id of kind k to its registry of live campaigns,
// scored by its close time in ms. It is another slot than the campaign's
// keys, so no campaign script may write it: the engine calls it before
// the activation, after it, and on every create that finds the campaign
// live (hongbao's register.go). Registering again only updates the score.
func (s *Store) Register(ctx context.Context, k *Kind, id string, closesAt int64) error {
	err := s.c.Do(ctx, s.c.B().Zadd().Key(s.ns.Index(k)).ScoreMember().
		ScoreMember(float64(closesAt), id).Build()).Error()
	if err != nil {
		return fmt.Errorf("register %s %s: %w", k.Name, id, err)
	}
	return nil
}

// Registered reports whether campaign id is in the registry of live
// campaigns of kind k.
func (s *Store) Registered(ctx context.Context, k *Kind, id string) (bool, error) {
	_, err := s.c.Do(ctx, s.c.B().Zscore().Key(s.ns.Index(k)).Member(id).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("registered %s %s: %w", k.Name, id, err)
	}
	return true, nil
}

// Campaigns lists the registered (not yet settled) campaigns of kind k,
// by close time.
func (s *Store) Campaigns(ctx context.Context, k *Kind) ([]string, error) {
	ids, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.ns.Index(k)).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", k.Name, err)
	}
	return ids, nil
}

// Unregister removes a settled campaign of kind k from its registry and
// lets every key of its shards (All) expire after retention (kept when
// retention is not positive).
func (s *Store) Unregister(ctx context.Context, k *Kind, id string, shards []Keys, retention time.Duration) error {
	cmds := []rueidis.Completed{s.c.B().Zrem().Key(s.ns.Index(k)).Member(id).Build()}
	if retention > 0 {
		for _, sh := range shards {
			for _, key := range k.All(sh) {
				cmds = append(cmds, s.c.B().Pexpire().Key(key).Milliseconds(retention.Milliseconds()).Build())
			}
		}
	}
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("unregister %s %s: %w", k.Name, id, err)
		}
	}
	return nil
}
