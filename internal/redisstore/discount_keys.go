package redisstore

// DiscountKeys are the Redis keys of one shard of a discount campaign.
// Shard 0, the root, has the hash tag {d:<id>}; shard k the tag
// ShardTagOf("d:<id>", shards, k), so the shards spread over the slot
// ranges as a red packet campaign's do. Every script of a discount
// campaign touches the keys of one shard, one slot.
type DiscountKeys struct {
	Tag      string // the hash tag, without braces
	Meta     string // hash: spec, state, counters
	Pool     string // list: amounts not yet reserved, "<seq>:<cents>", served from the head
	Usage    string // hash: user -> "<count>:<cents>" confirmed or reserved
	Resv     string // hash: "<user>/<order>" -> reservation record
	Holds    string // list: "<expires_ms>|<user>/<order>" per reservation made, in expiry order; the reaper drops them as they come due
	Confirms string // stream: one entry per confirm batch, "<user>/<order>" -> "<seq>:<cents>"
	Dead     string // stream: confirmations that failed settlement, for an operator
	Staging  string // list: the pool while it loads
	Xfers    string // hash: transfers out of this shard in flight, xid -> record
	Applied  string // hash: id of each transfer this shard received -> "<count>:<cents>:<sha1 of its packets>"
	Blocked  string // hash: user -> ms it was blocked, the users homed here that disc_reserve.lua refuses
	prefix   string // the namespace's prefix, "<ns>:"
}

// DiscountRootTag is the hash tag of discount campaign id's root shard.
func DiscountRootTag(id string) string { return "d:" + id }

// discountKeysOfTag is the only place that spells a discount key.
func discountKeysOfTag(ns, tag string) DiscountKeys {
	p := ns + "{" + tag + "}:"
	return DiscountKeys{
		Tag:      tag,
		prefix:   ns,
		Meta:     p + "meta",
		Pool:     p + "pool",
		Usage:    p + "usage",
		Resv:     p + "resv",
		Holds:    p + "holds",
		Confirms: p + "confirms",
		Dead:     p + "dead",
		Staging:  p + "staging",
		Xfers:    p + "xfers",
		Applied:  p + "applied",
		Blocked:  p + "blocked",
	}
}

// Keys is the shard seen as a campaign shard, for the scripts and calls a
// discount campaign shares with red packet campaigns: loading and
// activation (load.lua, activate.lua: the confirms stream takes the place
// of the grants stream), status.lua, close.lua, the transfers between
// shards (xfer_take.lua, xfer_apply.lua, Recover) and the settlement
// stream calls (ReadGroup, AutoClaim, Ack, Dead, Group, TrimSettled,
// Backlog, Redrive). Claims is the reservations hash; nothing of the red
// packet engine reads it as claims.
func (k DiscountKeys) Keys() Keys {
	// The keys a rebuild or a settlement WAIT use are spelled as a
	// campaign shard's, in the same slot.
	ck := keysOfTag(k.prefix, k.Tag)
	return Keys{
		Tag: k.Tag, Meta: k.Meta, Pool: k.Pool, Claims: k.Resv, Grants: k.Confirms,
		Dead: k.Dead, Staging: k.Staging, Xfers: k.Xfers, Applied: k.Applied, Lost: ck.Lost, Sync: ck.Sync,
		Blocked: k.Blocked, prefix: k.prefix,
	}
}

// All lists every key of the shard, each once, those of its Keys view
// included: what a settled campaign lets expire (UnregisterDiscount). The
// first ten are disc_begin.lua's KEYS, in its order (loadKeys); a key
// added to DiscountKeys is added here.
func (k DiscountKeys) All() []string {
	v := k.Keys()
	return []string{k.Meta, k.Staging, k.Pool, k.Usage, k.Resv, k.Holds, k.Confirms, k.Dead, k.Xfers, k.Applied, v.Lost, v.Sync, k.Blocked}
}

// ReserveKeys are the KEYS of disc_reserve.lua (the first five those of
// disc_reap.lua) for one shard, built once per campaign by callers on the
// hot path.
func (k DiscountKeys) ReserveKeys() []string {
	return []string{k.Meta, k.Pool, k.Usage, k.Resv, k.Holds, k.Blocked}
}

// ConfirmKeys are the KEYS of disc_confirm.lua for one shard.
func (k DiscountKeys) ConfirmKeys() []string {
	return []string{k.Meta, k.Resv, k.Confirms}
}

// CancelKeys are the KEYS of disc_cancel.lua for one shard.
func (k DiscountKeys) CancelKeys() []string {
	return []string{k.Meta, k.Pool, k.Usage, k.Resv}
}

// OrderKey is how a reservation is named inside a shard: "<user>/<order>".
// Neither user ids nor order ids may contain '/', so it splits back
// unambiguously (SplitOrderKey).
func OrderKey(user, order string) string { return user + "/" + order }

// SplitOrderKey splits an OrderKey; ok is false when key has no '/'.
func SplitOrderKey(key string) (user, order string, ok bool) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[:i], key[i+1:], i > 0 && i < len(key)-1
		}
	}
	return "", "", false
}
