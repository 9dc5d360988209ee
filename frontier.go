package hongbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// The durable pop frontier (internal/redisstore/blocks.go). When
// Config.Packets is a ledger.BlockRecorder (a ledger.Ledger is), a
// campaign's pools start sealed, and a grab pops only from blocks the
// ledger recorded as opened. A grab that finds only sealed packets left
// answers Sealed; the engine then opens the next block (peek, record in
// the ledger, open) and asks again, so nobody is told SOLD_OUT while
// packets remain. Opening a block costs one ledger write per BlockSize
// packets; the grabs in between pay nothing (one more meta field read).
//
// Stopped between the steps: recorded but not opened, the block stays
// sealed and the next open records it again under the same id (its
// digest); opened, it is already recorded. After Redis lost the
// campaign, a rebuild quarantines the packets of recorded blocks that no
// record names a holder of, and puts every other packet back.

// DefaultBlockSize is Config.BlockSize's default.
const DefaultBlockSize = 10000

// errNoRecorder: a pool is sealed and this engine records no blocks.
var errNoRecorder = errors.New("the pool is sealed and this engine has no block recorder (Config.Packets) to open it")

// frontierFields are the meta fields of a shard of count packets: sealed
// whole under the frontier, none without it.
func (e *Engine) frontierFields(count int) []string {
	if e.co.blocks == nil {
		return nil
	}
	return redisstore.FrontierFields(e.cfg.BlockSize, count)
}

// openNext opens the next block of shard k of campaign id. found is
// false when nothing is sealed on the shard; otherwise the caller asks
// again (opened or not: another engine may have opened it first).
func (c *coalescer) openNext(ctx context.Context, id string, k int, keys redisstore.Keys) (found bool, err error) {
	b, err := c.store.PeekBlock(ctx, keys, c.blockSize)
	if err != nil || b == nil {
		return false, err
	}
	if c.blocks == nil {
		return true, errNoRecorder
	}
	if err := c.blocks.OpenBlock(ctx, id, ledger.Block{ID: b.Digest, Shard: k, Seqs: b.Seqs}); err != nil {
		return true, fmt.Errorf("record block of shard %d: %w", k, err)
	}
	if _, err := c.store.OpenBlock(ctx, keys, b); err != nil {
		return true, err
	}
	return true, nil
}
