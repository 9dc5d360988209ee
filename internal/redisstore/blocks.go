package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The durable pop frontier. Under it (meta has field block, the block
// size) the head of a shard's pool holds meta's sealed packets, which no
// grab pops: grab.lua answers Sealed when only they remain. The engine
// opens the next block in three steps: PeekBlock reads it, the engine
// records its packets in the ledger (ledger.BlockRecorder), and
// OpenBlock moves the frontier over it if it is still the next block.
// Stopped between any two steps nothing is popped that the ledger does
// not know may be: a block recorded but not opened stays sealed (and a
// later open records it again, under the same id). After Redis lost a
// campaign, a rebuild puts back the packets of blocks never recorded and
// holds out (quarantines) the recorded ones nobody is known to hold.
// Transfers take from the head, so they move sealed packets first, and
// the destination adds what it receives to its sealed part.

// Block is the next block of a shard's pool, as PeekBlock read it.
type Block struct {
	Packets []string // "<seq>:<cents>", in pool order
	Seqs    []int64
	Digest  string // SHA-1 of the packets joined by ',': the block's id
	low     int
}

// PeekBlock reads the next block (at most size packets) of shard k. It
// returns nil when nothing is sealed, or when the opened part holds low
// packets or more (low 1: open only an empty one; more, ahead of need).
func (s *Store) PeekBlock(ctx context.Context, k Keys, size, low int) (*Block, error) {
	vals, err := s.s.blockPeek.Exec(ctx, s.c, []string{k.Meta, k.Pool}, []string{strconv.Itoa(size), strconv.Itoa(low)}).AsStrSlice()
	if err != nil {
		return nil, resultError("peek block "+k.Tag, err)
	}
	if len(vals) == 0 {
		return nil, nil
	}
	b := &Block{Packets: vals, Seqs: make([]int64, len(vals)), low: low}
	for i, p := range vals {
		if b.Seqs[i], _, err = ParseClaim(p); err != nil {
			return nil, fmt.Errorf("peek block %s: %w", k.Tag, err)
		}
	}
	sum := sha1.Sum([]byte(strings.Join(vals, ",")))
	b.Digest = hex.EncodeToString(sum[:])
	return b, nil
}

// OpenBlock opens block b of shard k, which the ledger holds: opened is
// false when b is no longer the next block, or the opened part holds the
// peek's low packets or more (nothing changed).
// It needs no WAIT: a failover that loses an open only seals its packets
// again, and the grabs that popped them were on the same primary.
func (s *Store) OpenBlock(ctx context.Context, k Keys, b *Block) (opened bool, err error) {
	n, err := s.s.blockOpen.Exec(ctx, s.c, []string{k.Meta, k.Pool}, []string{strconv.Itoa(len(b.Packets)), b.Digest, strconv.Itoa(b.low)}).AsInt64()
	if err != nil {
		return false, resultError("open block "+k.Tag, err)
	}
	return n == 1, nil
}
