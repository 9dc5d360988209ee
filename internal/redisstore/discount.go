package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/internal/luascript"
)

// Discount campaigns. A discount campaign spends a budget over a quota of
// pre-drawn amounts, spread over shards like a sharded red packet
// campaign: a user's usage, its reservations and the amounts it is served
// from live on its home shard, so every decision is one script on one
// slot (disc_reserve.lua, disc_confirm.lua, disc_cancel.lua,
// disc_reap.lua). Loading, activation, status, closing, transfers between
// shards and the settlement stream calls are the red packet campaign's
// own, on DiscountKeys.Keys().

// Outcome codes of the discount scripts, as lua/lib/outcomes.lua defines
// them (held to it by the root package's TestOutcomeCodes).
const (
	DiscountReserved   = 1  // reserve: reserved now; confirm: confirmed now; cancel: cancelled now
	DiscountAlready    = 2  // the same answer as before: reserved or confirmed; confirmed; cancelled
	DiscountExhausted  = 3  // a one-shard campaign's pool is empty, or the campaign closed exhausted
	DiscountNotOpen    = 4  // before opens_at
	DiscountClosed     = 5  // after closes_at, or closed (not exhausted)
	DiscountNoCampaign = 6  // no such shard, or still loading
	DiscountDry        = 7  // a shard of a sharded campaign is empty
	DiscountLimit      = 8  // the user's count or amount limit is used up
	DiscountCancelled  = 9  // the order's reservation was cancelled
	DiscountExpired    = 10 // the order's reservation expired
	DiscountNotFound   = 11 // no reservation of the order on this shard
	DiscountConfirmed  = 12 // cancel: the order was confirmed, too late
	DiscountMismatch   = 13 // reserve: the order holds a reservation made for another order amount
	DiscountPaused     = 14 // reserve: the campaign is paused (pause.lua) while its window is open
	DiscountBlocked    = 15 // reserve: the user is blocked on this campaign (block.lua)
)

// MaxDiscountBatch is the most requests one discount script call takes.
const MaxDiscountBatch = 1000

// MaxReap is the most reservations one disc_reap.lua call expires.
const MaxReap = 1000

// DiscountResult is one request's answer from a discount script.
type DiscountResult struct {
	Code      int
	Seq       int64 // the unit of quota (the pool entry's seq)
	Cents     int64 // the discount
	ExpiresMs int64 // when the reservation's hold ends, Redis clock
}

// DiscountCall is one request of a discount batch script: a user's
// order, and for a reserve the order's amount.
type DiscountCall struct {
	User, Order string
	Cents       int64 // the order amount (reserve only)
}

// Reserve runs disc_reserve.lua on one shard: keys are its ReserveKeys,
// shards the campaign's shard count as the caller routed with it, calls a
// batch (1..MaxDiscountBatch). It writes one result per call into out. A
// caller that routed with a stale shard count gets a *ShardsError and
// nothing was written.
func (s *Store) Reserve(ctx context.Context, keys []string, shards int, calls []DiscountCall, out []DiscountResult) error {
	return s.discountExec(ctx, s.s.discountReserve, WaitReserve, keys, shards, calls, true, out)
}

// Confirm runs disc_confirm.lua on one shard, as Reserve: keys are its
// ConfirmKeys; the calls' Cents are not sent.
func (s *Store) Confirm(ctx context.Context, keys []string, shards int, calls []DiscountCall, out []DiscountResult) error {
	return s.discountExec(ctx, s.s.discountConfirm, WaitConfirm, keys, shards, calls, false, out)
}

// Cancel runs disc_cancel.lua on one shard, as Reserve: keys are its
// CancelKeys; the calls' Cents are not sent.
func (s *Store) Cancel(ctx context.Context, keys []string, shards int, calls []DiscountCall, out []DiscountResult) error {
	return s.discountExec(ctx, s.s.discountCancel, WaitCancel, keys, shards, calls, false, out)
}

// discountExec encodes a discount batch into its script's ARGV (the shard
// count, then user, order and, with cents (a reserve), the order cents
// per call) and runs it.
func (s *Store) discountExec(ctx context.Context, sc *luascript.Script, op WaitOp, keys []string, shards int, calls []DiscountCall, cents bool, out []DiscountResult) error {
	per := 2
	if cents {
		per = 3
	}
	argv := getArgv(1 + per*len(calls))
	*argv = appendDiscountArgv(*argv, shards, calls, cents)
	err := s.discountRun(ctx, sc, op, keys, *argv, out)
	putArgv(argv)
	return err
}

// appendDiscountArgv appends a discount batch script's ARGV to a.
func appendDiscountArgv(a []string, shards int, calls []DiscountCall, cents bool) []string {
	a = append(a, shardsArg(shards))
	for _, c := range calls {
		a = append(a, c.User, c.Order)
		if cents {
			a = append(a, strconv.FormatInt(c.Cents, 10))
		}
	}
	return a
}

// discountRun runs a discount batch script, followed under WAIT by WAIT as
// a grab is (and by the sync of an answer given from earlier writes, see
// sync.go), and decodes its reply into out: four integers per request. A
// WAIT that falls short is an *UnknownError, as for a grab.
func (s *Store) discountRun(ctx context.Context, sc *luascript.Script, op WaitOp, keys, argv []string, out []DiscountResult) error {
	r, werr := s.execSync(ctx, op, sc, keys, argv, s.syncOf(keys[0], discountSilent))
	vals, err := r.AsIntSlice()
	if err == nil {
		err = werr
	}
	if err != nil {
		return shardsError(resultError(op.String(), err))
	}
	if len(vals) != 4*len(out) {
		return fmt.Errorf("%s: reply of %d values for %d requests", op, len(vals), len(out))
	}
	for i := range out {
		out[i] = DiscountResult{Code: int(vals[4*i]), Seq: vals[4*i+1], Cents: vals[4*i+2], ExpiresMs: vals[4*i+3]}
	}
	return nil
}

// Reap runs disc_reap.lua on one shard: it takes up to most (1..MaxReap)
// due holds off the holds list, expires those still reserved, and says
// whether more may be due.
func (s *Store) Reap(ctx context.Context, k DiscountKeys, most int) (expired int, more bool, err error) {
	vals, err := s.s.discountReap.Exec(ctx, s.c, k.ReserveKeys()[:5], []string{strconv.Itoa(most)}).AsIntSlice()
	if err != nil {
		return 0, false, resultError("reap "+k.Tag, err)
	}
	if len(vals) != 2 {
		return 0, false, fmt.Errorf("reap %s: reply of %d values", k.Tag, len(vals))
	}
	return int(vals[0]), vals[1] == 1, nil
}

// DiscountSettle records the refund of one closed shard (what its pool and
// compensation hold) and marks it settled; changed is false when it was
// settled already.
func (s *Store) DiscountSettle(ctx context.Context, k DiscountKeys, refund int64) (changed bool, err error) {
	vals, err := s.s.discountSettle.Exec(ctx, s.c, []string{k.Meta, k.Pool, k.Xfers, k.Holds},
		[]string{strconv.FormatInt(refund, 10)}).ToArray()
	if err != nil {
		return false, resultError("settle discount "+k.Tag, err)
	}
	if len(vals) != 3 {
		return false, fmt.Errorf("settle discount %s: reply of %d elements", k.Tag, len(vals))
	}
	c, _ := vals[2].AsInt64()
	return c == 1, nil
}

// DiscountView is a read of every shard of a discount campaign, the root
// first. Each snapshot is consistent; the set is read in one round trip
// after the root's, not at one instant.
type DiscountView struct {
	ID     string
	Shards []DiscountKeys
	Snaps  []Snapshot
}

// Root is the root shard's snapshot: the campaign's spec and state.
func (v *DiscountView) Root() Snapshot { return v.Snaps[0] }

// ReadDiscount reads discount campaign id: the root first, which says how
// many shards there are, then the others. ErrNoCampaign when the root does
// not exist.
func (s *Store) ReadDiscount(ctx context.Context, id string) (*DiscountView, error) {
	v, err := s.ReadOf(ctx, Discount, id)
	if err != nil {
		return nil, err
	}
	return &DiscountView{ID: id, Shards: s.ns.DiscountLayout(id, len(v.Shards)), Snaps: v.Snaps}, nil
}

// ShardViews returns the campaign-shard view (Keys) of every shard.
func ShardViews(shards []DiscountKeys) []Keys {
	out := make([]Keys, len(shards))
	for i, k := range shards {
		out[i] = k.Keys()
	}
	return out
}

// Reservation is a reservation record as stored:
// "<state>|<seq>|<amount>|<cents>|<expires_ms>|<order_cents>".
type Reservation struct {
	// State is 'r' (reserved), 'c' (confirmed), 'x' (cancelled) or 'e'
	// (expired).
	State byte
	// Seq is the unit of quota; Amount the pool entry it came with;
	// Cents the discount (Amount topped up from compensation, clipped).
	Seq, Amount, Cents int64
	ExpiresMs          int64
	OrderCents         int64
}

// ParseReservation reads a reservation record.
func ParseReservation(v string) (Reservation, error) {
	parts := strings.Split(v, "|")
	if len(parts) != 6 || len(parts[0]) != 1 || !strings.Contains("rcxe", parts[0]) {
		return Reservation{}, fmt.Errorf("%w: reservation %q", ErrCorrupt, v)
	}
	r := Reservation{State: parts[0][0]}
	for i, p := range []*int64{&r.Seq, &r.Amount, &r.Cents, &r.ExpiresMs, &r.OrderCents} {
		n, err := strconv.ParseInt(parts[i+1], 10, 64)
		if err != nil || n < 0 {
			return Reservation{}, fmt.Errorf("%w: reservation %q", ErrCorrupt, v)
		}
		*p = n
	}
	if r.Seq < 1 || r.Cents < 1 || r.Amount < 1 {
		return Reservation{}, fmt.Errorf("%w: reservation %q", ErrCorrupt, v)
	}
	return r, nil
}

// ScanReservations calls fn for every reservation record of a shard, by
// its OrderKey.
func (s *Store) ScanReservations(ctx context.Context, k DiscountKeys, fn func(key string, r Reservation) error) error {
	return s.scanHash(ctx, k.Resv, func(key, v string) error {
		r, err := ParseReservation(v)
		if err != nil {
			return fmt.Errorf("scan reservations: %s: %w", key, err)
		}
		return fn(key, r)
	})
}

// ScanUsage calls fn for every user's usage on a shard: the count and
// cents of its discounts confirmed or reserved.
func (s *Store) ScanUsage(ctx context.Context, k DiscountKeys, fn func(user string, count, cents int64) error) error {
	return s.scanHash(ctx, k.Usage, func(user, v string) error {
		a, b, ok := strings.Cut(v, ":")
		count, err1 := strconv.ParseInt(a, 10, 64)
		cents, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("scan usage: %w: user %q: %q", ErrCorrupt, user, v)
		}
		return fn(user, count, cents)
	})
}

// ScanHolds calls fn for every hold in a shard's holds list, in list
// (expiry) order: the OrderKey and the expiry in ms. Holds of reservations
// confirmed or cancelled stay until the reaper takes them off.
func (s *Store) ScanHolds(ctx context.Context, k DiscountKeys, fn func(key string, expiresMs int64) error) error {
	for start := int64(0); ; start += scanPage {
		vals, err := s.c.Do(ctx, s.c.B().Lrange().Key(k.Holds).Start(start).Stop(start+scanPage-1).Build()).AsStrSlice()
		if err != nil {
			return fmt.Errorf("scan holds: %w", err)
		}
		for _, v := range vals {
			ms, key, ok := strings.Cut(v, "|")
			exp, err := strconv.ParseInt(ms, 10, 64)
			if !ok || err != nil || key == "" {
				return fmt.Errorf("scan holds: %w: %q", ErrCorrupt, v)
			}
			if err := fn(key, exp); err != nil {
				return err
			}
		}
		if len(vals) < scanPage {
			return nil
		}
	}
}

// scanHash calls fn for every field of a hash, in pages.
func (s *Store) scanHash(ctx context.Context, key string, fn func(field, value string) error) error {
	cursor := uint64(0)
	for {
		e, err := s.c.Do(ctx, s.c.B().Hscan().Key(key).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("scan %s: %w", key, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			if err := fn(e.Elements[i], e.Elements[i+1]); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}
