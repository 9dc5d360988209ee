package hongbao

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// coalescer coalesces the grabs of red packet campaigns (batcher.go):
// one lane per shard, grab.lua's users as the requests.
type coalescer struct {
	batcher[string, redisstore.GrabResult]
	store *redisstore.Store
	// blocks records the blocks opened under the pop frontier
	// (frontier.go); nil when Config.Packets cannot.
	blocks    ledger.BlockRecorder
	blockSize int
	opening   sync.Map // "<id>/<shard>" of the opens ahead of need in flight
	// counters of Stats
	blocksOpened, blocksAhead atomic.Uint64
	openingAhead              atomic.Int64
}

func newCoalescer(store *redisstore.Store, cfg Config, lf *life, obs *observers) *coalescer {
	c := &coalescer{store: store, blockSize: cfg.BlockSize}
	c.blocks, _ = cfg.Packets.(ledger.BlockRecorder)
	c.init(cfg, lf, obs, cfg.MaxBatch, func(id string, shards int) *route { return newRoute(store.NS(), id, shards) }, c.exec)
	c.ops = []string{opGrab: "grab"}
	return c
}

// grab queues user on campaign id's lane and waits for the answer.
func (c *coalescer) grab(ctx context.Context, id, user string) (redisstore.GrabResult, error) {
	return c.do(ctx, opGrab, id, user, user)
}

// exec runs one batch of lane l: users, out their answers. err fails the
// whole batch; each, when not nil, fails single users (those a refill
// could not serve).
func (c *coalescer) exec(ctx context.Context, l *lane[string, redisstore.GrabResult], users []string, out []redisstore.GrabResult) (each []error, err error) {
	if l.key.shards == 1 {
		// The hot path of every one-shard campaign: one script call.
		low, err := c.store.GrabHinted(ctx, l.route.calls[opGrab][0], l.route.shards, users, out)
		if err == nil && anyOutcome(out, redisstore.Sealed) {
			return c.serveDry(ctx, l.route, 0, users, out), nil
		}
		if low {
			c.prefetch(l.key.id, 0, l.route.keys[0])
		}
		var se *redisstore.ShardsError
		if !errors.As(err, &se) {
			return nil, err
		}
		// The campaign has shards: learn the layout, route each user home.
		return c.execRouted(ctx, c.learn(l.key.id, se.Shards), users, out, 0)
	}
	if r := c.current(l.key.id); r != l.route {
		return c.execRouted(ctx, r, users, out, 0)
	}
	return c.execShard(ctx, l.route, l.key.shard, users, out, 0)
}

// Stats are counters of the engine's batching since it started.
type Stats struct {
	// Batches counts grab script calls; Grabs counts the grabs they
	// carried.
	Batches, Grabs uint64
	// Transfers counts the transfers this engine made to refill a dry
	// shard, and Moved the packets they moved.
	Transfers, Moved uint64
	// Blocks counts the blocks of pools this engine opened under the pop
	// frontier (recorded in the ledger, then opened), Ahead those of them
	// opened ahead of need, in the background; OpeningAhead is how many
	// such opens are in flight now.
	Blocks, Ahead, OpeningAhead uint64
	// BatchSizes is the distribution of batch sizes: bucket i counts
	// batches of more than Max of bucket i-1 and at most Max users.
	BatchSizes []BatchBucket
	// WaitReplicas is Config.WaitReplicas: how many replicas each WAIT
	// asks for (0: the engine sends none).
	WaitReplicas int
	// WaitShort counts the WAITs that fewer than WaitReplicas replicas
	// acknowledged in time (calls answered ErrOutcomeUnknown, but for a
	// Held of a user who holds nothing, which is answered anyway), by
	// the operation they followed: every one of grab, reserve, confirm,
	// cancel, held, transfer, pause and block, 0 or more.
	// WaitLastAcked is how many replicas acknowledged the latest of them.
	WaitShort     map[string]uint64
	WaitLastAcked int
}

// BatchBucket is one bar of the batch size distribution.
type BatchBucket struct {
	Max   int
	Count uint64
}

func (c *coalescer) stats() Stats {
	s := Stats{Batches: c.batches.Load(), Grabs: c.requests.Load(), Transfers: c.transfers.Load(), Moved: c.moved.Load(),
		Blocks: c.blocksOpened.Load(), Ahead: c.blocksAhead.Load(), OpeningAhead: uint64(c.openingAhead.Load())}
	for i := range c.sizes {
		s.BatchSizes = append(s.BatchSizes, BatchBucket{Max: 1 << i, Count: c.sizes[i].Load()})
	}
	return s
}

// String draws the distribution in one line, for reports.
func (s Stats) String() string {
	out := fmt.Sprintf("%d grabs in %d batches", s.Grabs, s.Batches)
	for _, b := range s.BatchSizes {
		if b.Count > 0 {
			out += fmt.Sprintf(" | <=%d: %d", b.Max, b.Count)
		}
	}
	return out
}
