package redisstore

import (
	"cmp"
	"fmt"
	"strconv"
)

// Namespace is the first part of every key a deployment writes: its
// campaigns' keys (<ns>:{c:<id>}:meta), the campaign registries
// (<ns>:campaigns, <ns>:discounts), the request counters, the leases
// (<ns>:lease:) and the settlement wake channel. Two deployments sharing
// one Redis (or one Redis Cluster) in different namespaces never read or
// write each other's keys; the settle consumer group lives inside each
// campaign's own stream, so it is namespaced with it.
//
// The namespace sits before the hash tag, never inside it: a campaign's
// slot, and so the layout of its shards over a cluster, is the same in
// every namespace. The zero Namespace is DefaultNamespace, the keys every
// deployment had before namespaces existed, so an existing deployment
// needs no migration.
type Namespace struct{ name string }

// DefaultNamespace is the namespace of the zero Namespace: "hb".
const DefaultNamespace = "hb"

// MaxNamespaceLen is the longest namespace ParseNamespace accepts.
const MaxNamespaceLen = 64

// ParseNamespace checks name and returns its Namespace; "" is
// DefaultNamespace. A namespace is 1 to 64 ASCII letters, digits, '_',
// '-' or '.': no ':' (it ends the prefix), no braces (they would move the
// hash tag), no space.
func ParseNamespace(name string) (Namespace, error) {
	if name == "" {
		return Namespace{}, nil
	}
	if len(name) > MaxNamespaceLen {
		return Namespace{}, fmt.Errorf("namespace of %d bytes: at most %d", len(name), MaxNamespaceLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return Namespace{}, fmt.Errorf("namespace %q: byte %d (%q) is not a letter, digit, '_', '-' or '.'", name, i, c)
		}
	}
	return Namespace{name: name}, nil
}

// MustNamespace is ParseNamespace for names known to be valid (tests,
// constants); it panics on a bad one.
func MustNamespace(name string) Namespace {
	ns, err := ParseNamespace(name)
	if err != nil {
		panic(err)
	}
	return ns
}

// Name is the namespace's name: DefaultNamespace for the zero value.
func (n Namespace) Name() string { return cmp.Or(n.name, DefaultNamespace) }

// String is Name.
func (n Namespace) String() string { return n.Name() }

// prefix starts every key of the namespace.
func (n Namespace) prefix() string { return n.Name() + ":" }

// CampaignKeys builds the keys of campaign id, or of its root shard when
// it has several (see ShardKeys).
func (n Namespace) CampaignKeys(id string) Keys { return keysOfTag(n.prefix(), "c:"+id) }

// ShardKeys builds the keys of shard k of campaign id with shards shards.
// For shards == 1 they are CampaignKeys(id).
func (n Namespace) ShardKeys(id string, shards, k int) Keys {
	return keysOfTag(n.prefix(), ShardTag(id, shards, k))
}

// Layout returns the keys of every shard of campaign id, shard 0 first.
func (n Namespace) Layout(id string, shards int) []Keys {
	out := make([]Keys, shards)
	for k := range out {
		out[k] = n.ShardKeys(id, shards, k)
	}
	return out
}

// DiscountShardKeys builds the keys of shard k of discount campaign id with
// shards shards.
func (n Namespace) DiscountShardKeys(id string, shards, k int) DiscountKeys {
	return discountKeysOfTag(n.prefix(), ShardTagOf(DiscountRootTag(id), shards, k))
}

// DiscountLayout returns the keys of every shard of discount campaign id,
// shard 0 first. It is a pure function of the namespace, the id and shards.
func (n Namespace) DiscountLayout(id string, shards int) []DiscountKeys {
	out := make([]DiscountKeys, shards)
	for k := range out {
		out[k] = n.DiscountShardKeys(id, shards, k)
	}
	return out
}

// GlobalRateKey is the key of the service-wide request counter of the
// second sec (Unix time), shared by every serve process of the namespace.
func (n Namespace) GlobalRateKey(sec int64) string {
	return n.prefix() + "ratelimit:global:" + strconv.FormatInt(sec, 10)
}

// LeasePrefix starts the keys of the namespace's leases (package leader's
// Config.Prefix): the scheduler's and its parts'.
func (n Namespace) LeasePrefix() string { return n.prefix() + "lease:" }

// WakeChannel is the Pub/Sub channel on which the namespace's engines
// tell its scheduler that grants wait to be settled.
func (n Namespace) WakeChannel() string { return n.prefix() + "settle:wake" }

// ReadyKey is the key the engine's readiness probe writes (Engine.Health):
// a write of the namespace's own that Redis must take for the deployment
// to be ready, in no campaign's slot.
func (n Namespace) ReadyKey() string { return n.prefix() + "ready" }

// Default is the default namespace, "hb": for tests and tools that run on
// a Redis of their own. A deployment's code takes its namespace from its
// configuration (Store.NS), never from here (internal/codecheck holds it).
var Default Namespace
