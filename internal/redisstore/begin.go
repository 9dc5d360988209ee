package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hongbao/hongbao/internal/luascript"
)

// Beginning a load (begin.lua, disc_begin.lua): the meta a campaign or a
// shard starts loading with. The same parts make up the meta a rebuild
// swaps in (RebuiltMeta, rebuild_swap.lua), in the field names every
// script reads.

// Terms are a red packet campaign's terms, as its root's meta holds them.
type Terms struct {
	Total, Count int64 // cents; packets
	Min, Max     int64 // the least and most cents of one packet
	Split        string
	Seed         uint64
	Funding      string // the ledger account the campaign is funded from
	// Owner is the identity of the ledger or sink the campaign settles
	// into (OwnerField); "" records none.
	Owner string
}

func (t *Terms) appendTo(a []string) []string {
	if t == nil {
		return a
	}
	a = append(a, "total", i64(t.Total), "count", i64(t.Count), "min", i64(t.Min), "max", i64(t.Max),
		"split", t.Split, "seed", strconv.FormatUint(t.Seed, 10), "funding", t.Funding)
	if t.Owner != "" {
		a = append(a, OwnerField, t.Owner)
	}
	return a
}

// ShardShare is one shard's part of a sharded campaign: the layout, and
// the packets (or amounts) it was dealt.
type ShardShare struct {
	Shards, Shard        int
	BaseCount, BaseCents int64
}

func (sh *ShardShare) appendTo(a []string) []string {
	if sh == nil {
		return a
	}
	return append(a, "shards", strconv.Itoa(sh.Shards), "shard", strconv.Itoa(sh.Shard),
		"base_count", i64(sh.BaseCount), "base_cents", i64(sh.BaseCents))
}

// Frontier puts a shard's pool under the durable pop frontier (blocks.go):
// opened in blocks of Block packets, with Sealed packets sealed.
type Frontier struct{ Block, Sealed int64 }

func (f *Frontier) appendTo(a []string) []string {
	if f == nil {
		return a
	}
	return append(a, "block", i64(f.Block), "sealed", i64(f.Sealed))
}

// Meta is what Begin stores in the meta of a campaign, or of one shard of
// a sharded one, as it starts loading.
type Meta struct {
	Share    *ShardShare // nil for a one-shard campaign
	Terms    *Terms      // the campaign's terms: on its root only
	Frontier *Frontier   // nil: no frontier
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// Begin starts loading a campaign (or one shard of it) with meta m. If it
// already exists past loading, it returns its state and nothing is
// changed, unless restartUnused is set and the shard never granted, lent
// or borrowed a packet: then it is loaded afresh.
func (s *Store) Begin(ctx context.Context, k Keys, token string, restartUnused bool, m Meta) (existing string, err error) {
	keys := []string{k.Meta, k.Staging, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied}
	return s.beginLoad(ctx, s.s.begin, "begin load", keys, m.argv(token, restartUnused))
}

// argv is begin.lua's ARGV: the load token, the restart flag, then the
// meta fields.
func (m Meta) argv(token string, restartUnused bool) []string {
	a := beginArgv(token, restartUnused, 13)
	return m.Frontier.appendTo(m.Terms.appendTo(m.Share.appendTo(a)))
}

// DiscountMeta is what DiscountBegin stores in the meta of one shard of a
// discount campaign as it starts loading: every shard holds the terms.
type DiscountMeta struct {
	Budget, Quota               int64 // cents; amounts
	Min, Max                    int64 // the least and most cents of one amount
	PerUserCount, PerUserAmount int64 // a user's limits: reservations, cents
	HoldMs                      int64 // how long a reservation holds
	Funding                     string
	Seed                        uint64
	TailCount                   int64 // the amounts each shard serves last
	// Owner is the identity of the ledger or sink the campaign settles
	// into (OwnerField), recorded on the root shard only; "" records none.
	Owner string
	ShardShare
}

// DiscountBegin starts loading one shard of a discount campaign with meta
// m. If it already exists past loading, it returns its state and nothing
// is changed, unless restartUnused is set and the shard never reserved,
// lent or borrowed anything: then it is loaded afresh.
func (s *Store) DiscountBegin(ctx context.Context, k DiscountKeys, token string, restartUnused bool, m DiscountMeta) (existing string, err error) {
	keys := []string{k.Meta, k.Staging, k.Pool, k.Usage, k.Resv, k.Holds, k.Confirms, k.Dead, k.Xfers, k.Applied}
	return s.beginLoad(ctx, s.s.discountBegin, "begin discount load", keys, m.argv(token, restartUnused))
}

// argv is disc_begin.lua's ARGV: the load token, the restart flag, then
// the meta fields, the shard's counters at zero.
func (m DiscountMeta) argv(token string, restartUnused bool) []string {
	a := beginArgv(token, restartUnused, 22)
	a = append(a, "kind", "discount", "budget", i64(m.Budget), "quota", i64(m.Quota),
		"min", i64(m.Min), "max", i64(m.Max),
		"per_user_count", i64(m.PerUserCount), "per_user_amount", i64(m.PerUserAmount),
		"hold_ms", i64(m.HoldMs), "funding", m.Funding,
		"seed", strconv.FormatUint(m.Seed, 10), "tail_count", i64(m.TailCount))
	a = m.ShardShare.appendTo(a)
	if m.Owner != "" && m.Shard == 0 {
		a = append(a, OwnerField, m.Owner)
	}
	return append(a, "comp_cents", "0", "reserved_count", "0", "reserved_cents", "0",
		"confirmed_count", "0", "confirmed_cents", "0", "taken_cents", "0", "returned_cents", "0")
}

// beginArgv starts the ARGV of both begin scripts, with room for fields
// meta fields: the load token, then '1' to restart an unused shard.
func beginArgv(token string, restartUnused bool, fields int) []string {
	flag := "0"
	if restartUnused {
		flag = "1"
	}
	return append(make([]string, 0, 2+2*fields), token, flag)
}

// beginLoad runs a begin script and reads its reply: loading started
// ("" and nil), or the state of a campaign or shard past loading.
func (s *Store) beginLoad(ctx context.Context, sc *luascript.Script, op string, keys, argv []string) (existing string, err error) {
	vals, err := sc.Exec(ctx, s.c, keys, argv).ToArray()
	if err != nil {
		return "", resultError(op, err)
	}
	if len(vals) != 2 {
		return "", fmt.Errorf("%s: reply of %d elements", op, len(vals))
	}
	if code, _ := vals[0].AsInt64(); code == 1 {
		st, _ := vals[1].ToString()
		return st, nil
	}
	return "", nil
}
