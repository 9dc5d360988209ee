package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/random"
)

// Transfers move packets between the shards of a campaign, one script on
// one slot per step, each step idempotent:
//
//  1. Take (on the source): packets leave the head of its pool into a
//     transfer record "xid -> dest|ms|packets" in the source's xfers hash,
//     in the same step. The id is the source shard and a random nonce.
//  2. Apply (on the destination): the packets join its pool and xid joins
//     its applied hash with what was applied (count, cents, a hash of the
//     packets), in one step; a second apply of xid with the same packets
//     is a no-op, with other packets an error (ErrTransferConflict).
//  3. Finish (on the source): the record is deleted.
//
// A process that dies between the steps leaves a record behind; Recover
// applies every record (a no-op where step 2 went through) and deletes it.
// So a packet is always in exactly one of: a pool, a claim, or a record
// not yet applied.
//
// Across a rebuild. A rebuild reads the records, places their packets and
// deletes them with everything else of the shards it swaps in (applied
// ids too); an apply still in hand (a Borrow between its steps, a Recover
// behind its replica wait) would put the packets in a pool a second
// time. So the take writes the shard's ledger fence, which every rebuild
// raises, into the id, and the apply refuses an id of another fence than
// its shard's (ErrTransferStale).
//
// Failover of either end. Ids are random, not a counter of the source's:
// a source that fails over to a replica that missed a finished transfer
// would otherwise hand the same id out again, and the destination would
// skip the new transfer as a repeat, its packets in no pool. Under
// WithWait each step is held by the replicas before the next one runs:
// the take before its packets are applied (else a failover of the source
// puts them back in its pool while the destination has them too: granted
// twice), the apply before the record is deleted (else a failover of the
// destination loses them). Recover reads records that a take whose WAIT
// fell short may have left, so it waits for the source's replicas before
// applying them (SyncReplicas), and an apply that finds its transfer
// applied before writes before its WAIT too (a WAIT on a connection that
// wrote nothing vouches for nothing). Without WithWait, a failover that
// loses the last writes of a transfer's source leaves its packets in two
// pools, and one of its destination's loses them (docs/durability.md).

// MaxTransfer is the most packets one transfer moves (Lua's argument
// limits, as for MaxBatch).
const MaxTransfer = 3000

// Transfer is a record of packets in flight between two shards.
type Transfer struct {
	ID      string   // "<source shard>-<random nonce>[@<ledger fence>]", unique within the campaign
	Dest    int      // destination shard
	AtMs    int64    // when it was taken, Redis clock of the source
	Packets []string // "<seq>:<cents>"
}

// xferNonce is how many random bytes make a transfer's id unique.
const xferNonce = 8

// TakeTransfer is step 1: it moves up to want packets from the head of
// src's pool into a transfer record for shard dest, under a new random
// id. No packets (an empty pool, or a shard that is closed) is a Transfer
// with none.
func (s *Store) TakeTransfer(ctx context.Context, src Keys, dest, want int) (Transfer, error) {
	keys := []string{src.Meta, src.Pool, src.Xfers}
	args := []string{strconv.Itoa(dest), strconv.Itoa(want), random.Hex(xferNonce)}
	r, werr := s.exec(ctx, WaitTransfer, s.s.xferTake, keys, args)
	vals, err := r.AsStrSlice()
	if err == nil {
		err = werr
	}
	if err != nil {
		return Transfer{}, resultError("take transfer from "+src.Tag, err)
	}
	if len(vals) == 0 {
		return Transfer{Dest: dest}, nil
	}
	return Transfer{ID: vals[0], Dest: dest, Packets: vals[1:]}, nil
}

// ApplyTransfer is step 2: it adds t's packets to dst's pool unless dst
// applied t before. It returns how many packets it added (0 for a repeat).
// A repeat of t.ID with other packets is ErrTransferConflict, one taken
// before a rebuild of the campaign ErrTransferStale, nothing added. Under WithWait a repeat is answered once the replicas hold what
// it found: the first apply may have been answered by a short WAIT, and
// a repeat writes nothing its own WAIT could wait for, so it writes in
// dst's slot and waits behind that (SyncReplicas).
func (s *Store) ApplyTransfer(ctx context.Context, dst Keys, t Transfer) (int64, error) {
	args := make([]string, 0, 1+len(t.Packets))
	args = append(append(args, t.ID), t.Packets...)
	keys := []string{dst.Meta, dst.Pool, dst.Applied}
	r, werr := s.exec(ctx, WaitTransfer, s.s.xferApply, keys, args)
	n, err := r.AsInt64()
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, resultError("apply transfer "+t.ID+" to "+dst.Tag, err)
	}
	if n == 0 && s.waitN > 0 {
		if err := s.syncOwn(ctx, WaitTransfer, dst); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// FinishTransfer is step 3: it deletes the record of transfer xid at src.
func (s *Store) FinishTransfer(ctx context.Context, src Keys, xid string) error {
	if err := s.c.Do(ctx, s.c.B().Hdel().Key(src.Xfers).Field(xid).Build()).Error(); err != nil {
		return fmt.Errorf("finish transfer %s at %s: %w", xid, src.Tag, err)
	}
	return nil
}

// Transfers lists the records in flight out of shard src.
func (s *Store) Transfers(ctx context.Context, src Keys) ([]Transfer, error) {
	m, err := s.c.Do(ctx, s.c.B().Hgetall().Key(src.Xfers).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("transfers of %s: %w", src.Tag, err)
	}
	out := make([]Transfer, 0, len(m))
	for xid, rec := range m {
		t, err := parseTransfer(xid, rec)
		if err != nil {
			return nil, fmt.Errorf("transfers of %s: %w", src.Tag, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseTransfer reads a record "dest|ms|packet,packet,...".
func parseTransfer(xid, rec string) (Transfer, error) {
	parts := strings.SplitN(rec, "|", 3)
	if len(parts) != 3 || parts[2] == "" {
		return Transfer{}, fmt.Errorf("%w: transfer %s: record %q", ErrCorrupt, xid, rec)
	}
	dest, err1 := strconv.Atoi(parts[0])
	at, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || dest < 0 {
		return Transfer{}, fmt.Errorf("%w: transfer %s: record %q", ErrCorrupt, xid, rec)
	}
	packets := strings.Split(parts[2], ",")
	for _, p := range packets {
		if _, _, err := ParseClaim(p); err != nil {
			return Transfer{}, fmt.Errorf("transfer %s: %w", xid, err)
		}
	}
	return Transfer{ID: xid, Dest: dest, AtMs: at, Packets: packets}, nil
}

// Applied reports, for each transfer id, whether shard dst applied it.
func (s *Store) Applied(ctx context.Context, dst Keys, xids []string) ([]bool, error) {
	if len(xids) == 0 {
		return nil, nil
	}
	vals, err := s.c.Do(ctx, s.c.B().Hmget().Key(dst.Applied).Field(xids...).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("applied transfers of %s: %w", dst.Tag, err)
	}
	out := make([]bool, len(vals))
	for i := range vals {
		out[i] = !vals[i].IsNil()
	}
	return out, nil
}

// PoolLengths reads the pool length of every shard in one round trip.
func (s *Store) PoolLengths(ctx context.Context, shards []Keys) ([]int64, error) {
	cmds := make([]rueidis.Completed, len(shards))
	for i, k := range shards {
		cmds[i] = s.c.B().Llen().Key(k.Pool).Build()
	}
	out := make([]int64, len(shards))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("pool length of %s: %w", shards[i].Tag, err)
		}
		out[i] = n
	}
	return out, nil
}

// Recover finishes the transfers in flight out of every shard of a
// campaign that are at least minAge old by the Redis clock: each is
// applied to its destination (a no-op where that step went through
// before) and its record deleted. It returns how many it finished. It is
// safe at any time, also beside the process that started a transfer:
// every step is idempotent. Under WithWait it applies a shard's records
// only once the shard's replicas hold them (a take whose WAIT fell short
// leaves a record that only the primary may hold), and deletes one only
// once the destination's replicas hold its apply. A record whose id its
// destination applied with other packets stops it with
// ErrTransferConflict, the record kept: an operator looks into it.
func (s *Store) Recover(ctx context.Context, shards []Keys, minAge time.Duration) (int, error) {
	var now int64
	if minAge > 0 {
		var err error
		if now, err = redisNow(s.c.Do(ctx, s.c.B().Time().Build())); err != nil {
			return 0, fmt.Errorf("recover transfers: %w", err)
		}
	}
	done := 0
	for _, src := range shards {
		ts, err := s.Transfers(ctx, src)
		if err != nil {
			return done, err
		}
		due := ts[:0]
		for _, t := range ts {
			if minAge <= 0 || now-t.AtMs >= minAge.Milliseconds() {
				due = append(due, t)
			}
		}
		n, err := s.recoverFrom(ctx, shards, src, due)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// recoverFrom applies and deletes the records ts read from shard src.
func (s *Store) recoverFrom(ctx context.Context, shards []Keys, src Keys, ts []Transfer) (int, error) {
	if len(ts) == 0 {
		return 0, nil
	}
	if s.waitN > 0 {
		// Written after the records were read, so the replicas that
		// acknowledge it hold them.
		if err := s.syncOwn(ctx, WaitTransfer, src); err != nil {
			return 0, err
		}
	}
	done := 0
	for _, t := range ts {
		if t.Dest >= len(shards) {
			return done, fmt.Errorf("transfer %s of %s: %w: destination shard %d of %d", t.ID, src.Tag, ErrCorrupt, t.Dest, len(shards))
		}
		if _, err := s.ApplyTransfer(ctx, shards[t.Dest], t); err != nil {
			return done, err
		}
		if err := s.FinishTransfer(ctx, src, t.ID); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// ErrNothingToLend: no other shard has anything in its pool and no
// transfer was in flight (Borrow).
var ErrNothingToLend = errors.New("no shard has anything to lend")

// Borrow brings packets to dry shard k of a campaign laid out as shards,
// for need users, by one transfer from the shard with the most: half its
// pool, at least need, at most MaxTransfer, taken from its head (grabs
// take from the tail, so the lender keeps what it would hand out next,
// and the borrower hands out what it received first). When no other pool
// has any, it
// finishes the transfers in flight (anyone's: every step is idempotent);
// when there was none either, it is ErrNothingToLend. moved counts the
// packets this call moved (0 when k had some again, or when it finished
// others' transfers): either way, the caller asks again.
func (s *Store) Borrow(ctx context.Context, shards []Keys, k, need int) (moved int, err error) {
	lens, err := s.PoolLengths(ctx, shards)
	if err != nil {
		return 0, err
	}
	if lens[k] > 0 {
		return 0, nil // someone else refilled it
	}
	order := make([]int, 0, len(shards)-1)
	for j, n := range lens {
		if j != k && n > 0 {
			order = append(order, j)
		}
	}
	sort.Slice(order, func(a, b int) bool { return lens[order[a]] > lens[order[b]] })
	for _, j := range order {
		want := min(max(need, int((lens[j]+1)/2)), MaxTransfer)
		t, err := s.TakeTransfer(ctx, shards[j], k, want)
		if err != nil {
			return 0, err
		}
		if len(t.Packets) == 0 {
			continue
		}
		// Under WithWait the take's WAIT held it on the replicas before
		// this apply, and the apply's holds it before the delete.
		if _, err := s.ApplyTransfer(ctx, shards[k], t); errors.Is(err, ErrTransferStale) {
			return 0, nil // a rebuild placed the packets meanwhile: ask again
		} else if err != nil {
			return 0, err // the record stays; recovery applies it
		}
		// Best effort: a record left behind is applied again as a no-op
		// and deleted by the next recovery.
		_ = s.FinishTransfer(ctx, shards[j], t.ID)
		return len(t.Packets), nil
	}
	n, err := s.Recover(ctx, shards, 0)
	if err != nil || n > 0 {
		return 0, err
	}
	return 0, ErrNothingToLend
}
