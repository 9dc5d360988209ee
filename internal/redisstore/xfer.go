package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Transfers move packets between the shards of a campaign, one script on
// one slot per step, each step idempotent:
//
//  1. Take (on the source): packets leave the head of its pool into a
//     transfer record "xid -> dest|ms|packets" in the source's xfers hash,
//     in the same step.
//  2. Apply (on the destination): the packets join its pool and xid joins
//     its applied set, in one step; a second apply of xid is a no-op.
//  3. Finish (on the source): the record is deleted.
//
// A process that dies between the steps leaves a record behind; Recover
// applies every record (a no-op where step 2 went through) and deletes it.
// So a packet is always in exactly one of: a pool, a claim, or a record
// not yet applied.

// MaxTransfer is the most packets one transfer moves (Lua's argument
// limits, as for MaxBatch).
const MaxTransfer = 3000

// Transfer is a record of packets in flight between two shards.
type Transfer struct {
	ID      string   // "<source shard>-<n>", unique within the campaign
	Dest    int      // destination shard
	AtMs    int64    // when it was taken, Redis clock of the source
	Packets []string // "<seq>:<cents>"
}

// TakeTransfer is step 1: it moves up to want packets from the head of
// src's pool into a transfer record for shard dest. No packets (an empty
// pool, or a shard that is closed) is a Transfer with none.
func (s *Store) TakeTransfer(ctx context.Context, src Keys, dest, want int) (Transfer, error) {
	keys, args := []string{src.Meta, src.Pool, src.Xfers}, []string{strconv.Itoa(dest), strconv.Itoa(want)}
	r, werr := s.exec(ctx, s.s.xferTake, keys, args)
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
func (s *Store) ApplyTransfer(ctx context.Context, dst Keys, t Transfer) (int64, error) {
	args := make([]string, 0, 1+len(t.Packets))
	args = append(append(args, t.ID), t.Packets...)
	keys := []string{dst.Meta, dst.Pool, dst.Applied}
	r, werr := s.exec(ctx, s.s.xferApply, keys, args)
	n, err := r.AsInt64()
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, resultError("apply transfer "+t.ID+" to "+dst.Tag, err)
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
	vals, err := s.c.Do(ctx, s.c.B().Smismember().Key(dst.Applied).Member(xids...).Build()).AsIntSlice()
	if err != nil {
		return nil, fmt.Errorf("applied transfers of %s: %w", dst.Tag, err)
	}
	out := make([]bool, len(vals))
	for i, v := range vals {
		out[i] = v == 1
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
// every step is idempotent.
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
		for _, t := range ts {
			if minAge > 0 && now-t.AtMs < minAge.Milliseconds() {
				continue
			}
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
	}
	return done, nil
}
