package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/internal/luascript"
)

// Beginning a load (begin.lua, disc_begin.lua): the meta a campaign or a
// shard starts loading with. The same parts make up the meta a rebuild
// swaps in (RebuiltMeta, rebuild_swap.lua), in the field names every
// script reads.

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
	Terms    *Terms      // the campaign's terms: on its root only (appendTerms)
	Frontier *Frontier   // nil: no frontier
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// Loader names one create's load of a campaign (begin.lua, disc_begin.lua):
// its token, and its place among the loads of the campaign.
type Loader struct {
	// Token is random and names the load: load.lua, renew.lua and
	// activate.lua act only for the load that holds the token.
	Token string
	// Epoch is 0 at the campaign's root, whose begin draws the load's
	// epoch (Begun.Epoch); at every other shard the epoch the root's
	// begin drew: a shard refuses a load older than the newest that
	// began it.
	Epoch int64
	// Hold, at the root, is how long the load holds the campaign without
	// a renewal (Renew, or a chunk of Load): while it runs another
	// create's begin is answered Held; once it lapsed the load may be
	// taken over. 0: the load can be taken over at once.
	Hold time.Duration
}

// Begun is what a begin found.
type Begun struct {
	// Epoch is the epoch the load began under, when it began (Existing
	// empty, Held false).
	Epoch int64
	// Existing is the state of a campaign (shard) past loading, or
	// "loading" when a rebuild holds it; nothing was changed.
	Existing string
	// Held: another load holds the campaign. At the root its hold runs
	// for Left more (wait, then begin again); at another shard a newer
	// load began it (this load lost the campaign). Nothing was changed.
	Held bool
	Left time.Duration
}

// Begin starts loading a campaign (or one shard of it) with meta m, for
// the load l. A campaign past loading is never touched (Begun.Existing),
// except a shard other than the root that never granted, lent or
// borrowed a packet: it is loaded afresh. A campaign loading under
// another load is taken over only once that load's hold lapsed, and a
// shard only by a load at least as new as the one that began it
// (Begun.Held otherwise).
func (s *Store) Begin(ctx context.Context, k Keys, l Loader, m Meta) (Begun, error) {
	keys := loadKeys(k.All(), keptByLoad(k))
	return s.beginLoad(ctx, s.s.begin, "begin load", keys, m.argv(l))
}

// argv is begin.lua's ARGV: the load, then the meta fields.
func (m Meta) argv(l Loader) []string {
	a := beginArgv(l, 13)
	return m.Frontier.appendTo(appendTerms(m.Terms, m.Share.appendTo(a)))
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
// m, for the load l, as Begin does; a shard other than the root past
// loading is loaded afresh when it never reserved, lent or borrowed
// anything.
func (s *Store) DiscountBegin(ctx context.Context, k DiscountKeys, l Loader, m DiscountMeta) (Begun, error) {
	keys := loadKeys(k.All(), keptByLoad(k.Keys()))
	return s.beginLoad(ctx, s.s.discountBegin, "begin discount load", keys, m.argv(l))
}

// argv is disc_begin.lua's ARGV: the load, then the meta fields, the
// shard's counters at zero.
func (m DiscountMeta) argv(l Loader) []string {
	a := beginArgv(l, 22)
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
// meta fields: the load token, its epoch (0 at the root) and, at the
// root, its hold in ms.
func beginArgv(l Loader, fields int) []string {
	hold := "0"
	if l.Epoch == 0 {
		hold = i64(l.Hold.Milliseconds())
	}
	return append(make([]string, 0, 3+2*fields), l.Token, i64(l.Epoch), hold)
}

// beginLoad runs a begin script and reads its reply.
func (s *Store) beginLoad(ctx context.Context, sc *luascript.Script, op string, keys, argv []string) (Begun, error) {
	vals, err := sc.Exec(ctx, s.c, keys, argv).ToArray()
	if err != nil {
		return Begun{}, resultError(op, err)
	}
	if len(vals) != 2 {
		return Begun{}, fmt.Errorf("%s: reply of %d elements", op, len(vals))
	}
	code, err := vals[0].AsInt64()
	if err != nil {
		return Begun{}, fmt.Errorf("%s: reply: %w", op, err)
	}
	switch code {
	case 0:
		epoch, err := vals[1].AsInt64()
		if err != nil || epoch < 1 {
			return Begun{}, fmt.Errorf("%s: epoch %d: %v", op, epoch, err)
		}
		return Begun{Epoch: epoch}, nil
	case 1:
		st, err := vals[1].ToString()
		if err != nil {
			return Begun{}, fmt.Errorf("%s: state: %w", op, err)
		}
		return Begun{Existing: st}, nil
	case 2:
		left, err := vals[1].AsInt64()
		if err != nil {
			return Begun{}, fmt.Errorf("%s: hold: %w", op, err)
		}
		return Begun{Held: true, Left: time.Duration(left) * time.Millisecond}, nil
	}
	return Begun{}, fmt.Errorf("%s: reply code %d", op, code)
}

// Renew sets the hold of the load token on campaign k (its root's keys)
// to last hold from now (renew.lua); 0 gives it up, so that another
// create may take the load over at once. ErrStale: the campaign is no
// longer loading under this token: another create took the load over, or
// it went live.
func (s *Store) Renew(ctx context.Context, k Keys, token string, hold time.Duration) error {
	if err := s.s.renew.Exec(ctx, s.c, []string{k.Meta}, []string{token, i64(hold.Milliseconds())}).Error(); err != nil {
		return resultError("renew load", err)
	}
	return nil
}
