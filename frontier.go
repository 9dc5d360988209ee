package hongbao

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

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

// frontier puts a shard of count packets sealed whole under the frontier;
// nil without it.
func (e *Engine) frontier(count int) *redisstore.Frontier {
	if e.co.blocks == nil {
		return nil
	}
	return &redisstore.Frontier{Block: int64(e.cfg.BlockSize), Sealed: int64(count)}
}

// openNext opens the next block of shard k of campaign id, when the
// opened part holds fewer than low packets (1: when it is empty). found
// is false when nothing is sealed on the shard or the opened part holds
// enough; otherwise the caller asks again (opened or not: another engine
// may have opened it first).
func (c *coalescer) openNext(ctx context.Context, id string, k int, keys redisstore.Keys, low int) (found bool, err error) {
	b, err := c.store.PeekBlock(ctx, keys, c.blockSize, low)
	if err != nil || b == nil {
		return false, err
	}
	if c.blocks == nil {
		return true, errNoRecorder
	}
	if err := c.blocks.OpenBlock(ctx, id, ledger.Block{ID: b.Digest, Shard: k, Seqs: b.Seqs}); err != nil {
		return true, ledgerErr(fmt.Sprintf("record block of shard %d", k), err)
	}
	opened, err := c.store.OpenBlock(ctx, keys, b)
	if opened {
		c.blocksOpened.Add(1)
		if low > 1 {
			c.blocksAhead.Add(1)
		}
	}
	return true, err
}

// ledgerErr files the failure of op, a call to the ledger: the ledger's
// own answers (a conflict, an invalid entry, packets or terms never
// recorded, a refusal, a fence, another owner) are verdicts to look into
// and stay as they are; anything else (the ledger unreachable or
// restarting, a timeout) is ErrLedgerUnavailable: what needed the ledger
// was not done (a block not opened, nothing granted from it; a campaign
// not created), and it may be retried.
func ledgerErr(op string, err error) error {
	err = fmt.Errorf("%s: %w", op, err)
	for _, v := range ledgerVerdicts {
		if errors.Is(err, v) {
			return err
		}
	}
	return &kindError{kind: ErrLedgerUnavailable, cause: err}
}

// ledgerVerdicts are the errors a ledger answers with when it was reached
// and refused (package ledger's sentinels).
var ledgerVerdicts = []error{ledger.ErrConflict, ledger.ErrNotFunded, ledger.ErrInvalid, ledger.ErrNoPackets,
	ledger.ErrNoTerms, ledger.ErrRefused, ledger.ErrFenced, ledger.ErrForeign, ledger.ErrNotMigrated, ledger.ErrSchemaAhead}

// prefetchTimeout bounds an open ahead of need.
const prefetchTimeout = 10 * time.Second

// prefetch opens the next block of shard k ahead of need, in the
// background, when grab.lua hinted that the opened part runs low: the
// grabs that follow find it open and never wait for the ledger. One at a
// time per shard and engine; block_peek.lua and block_open.lua open
// nothing once the opened part holds a quarter block again, so engines
// hinted at once open one block, not one each. A failure is left to the
// synchronous open a grab makes when only sealed packets remain.
// Shutdown waits for the opens in flight and starts none.
func (c *coalescer) prefetch(id string, k int, keys redisstore.Keys) {
	if c.blocks == nil || c.life.closing() {
		return // Shutdown began: no new work, and a grab opens what it needs
	}
	key := id + "/" + strconv.Itoa(k)
	if _, busy := c.opening.LoadOrStore(key, true); busy {
		return
	}
	c.openingAhead.Add(1)
	c.life.add() // from a lane in flight, so before Shutdown stops waiting
	go func() {
		defer c.life.done()
		defer c.openingAhead.Add(-1)
		defer c.opening.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		defer cancel()
		_, _ = c.openNext(ctx, id, k, keys, max(c.blockSize/4, 1))
	}()
}
