package redisstore

import "slices"

// Keys are the Redis keys of one campaign. They share the hash tag
// {c:<id>}, so every campaign script touches a single cluster slot.
type Keys struct {
	Tag     string // the hash tag, without braces: "c:<id>" or "c:<id>:<k>:<salt>"
	Meta    string // hash: spec, state, counters
	Pool    string // list: packets not yet granted, "<seq>:<cents>", in seq order
	Claims  string // hash: user -> "<seq>:<cents>"
	Grants  string // stream: one entry per grab batch, fields user -> "<seq>:<cents>"
	Dead    string // stream: grants that failed settlement, for an operator
	Staging string // list: the pool while it loads
	Xfers   string // hash: transfers out of this shard in flight, xid -> record
	Applied string // hash: id of each transfer this shard received -> "<count>:<cents>:<sha1 of its packets>"
	Lost    string // list: packets a rebuild found gone with no holder it could name
	Sync    string // string: written before a WAIT that must cover earlier writes (see SyncReplicas)
	Blocked string // hash: user -> ms it was blocked, the users homed here that grab.lua refuses; field "" a placeholder
	prefix  string // the namespace's prefix, "<ns>:"
}

// keysOfTag is the only place that spells a campaign key: ns is the
// namespace's prefix (Namespace.prefix), tag the shard's hash tag.
func keysOfTag(ns, tag string) Keys {
	p := ns + "{" + tag + "}:"
	return Keys{
		Tag:     tag,
		prefix:  ns,
		Meta:    p + "meta",
		Pool:    p + "pool",
		Claims:  p + "claims",
		Grants:  p + "grants",
		Dead:    p + "dead",
		Staging: p + "staging",
		Xfers:   p + "xfers",
		Applied: p + "applied",
		Lost:    p + "lost",
		Sync:    p + "sync",
		Blocked: p + "blocked",
	}
}

// All lists every key of the shard, each once: what a settled campaign
// lets expire (Unregister). The first eight are begin.lua's KEYS, in its
// order (loadKeys); a key added to Keys is added here.
func (k Keys) All() []string {
	return []string{k.Meta, k.Staging, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied, k.Lost, k.Sync, k.Blocked}
}

// keptByLoad are the keys of a shard that a fresh load leaves as they are
// (begin.lua, disc_begin.lua): the users an operator blocked, the packets
// only a rebuild finds lost, and the sync key, which holds nothing.
func keptByLoad(k Keys) []string { return []string{k.Lost, k.Sync, k.Blocked} }

// loadKeys are the keys of all, in its order, that a fresh load deletes:
// the KEYS of the begin scripts.
func loadKeys(all []string, kept []string) []string {
	out := make([]string, 0, len(all))
	for _, key := range all {
		if !slices.Contains(kept, key) {
			out = append(out, key)
		}
	}
	return out
}

// Staged are the keys a rebuild writes a shard into before it swaps them
// in: in the shard's slot, named by the rebuild's token so two rebuilds
// never mix, and expiring should the rebuild die.
type Staged struct {
	Pool, Claims, Grants, Lost string
}

// Staged returns the staged keys of rebuild token for shard k.
func (k Keys) Staged(token string) Staged {
	p := k.prefix + "{" + k.Tag + "}:rebuild:" + token + ":"
	return Staged{Pool: p + "pool", Claims: p + "claims", Grants: p + "grants", Lost: p + "lost"}
}

// SettleGroup is the consumer group that settlement reads the grants
// stream with. It is created with the stream, when a campaign activates.
const SettleGroup = "settle"

// LedgerFence is the meta field that holds the campaign's ledger fence
// (ledger.Ledger.Fence): written by a rebuild into every shard it rebuilt,
// read by settlement from the root with the entries it settles and passed
// to the ledger (ledger.WithFence). Absent means 0.
const LedgerFence = "ledger_fence"
