package settle

import (
	"context"
	"hash/fnv"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// Settlement can be shared by several processes, each settling its own
// parts of every campaign (package scheduler holds the leases). A
// deployment has P parts; part p holds shard k of campaign c when
// (FNV-1a(c) + k) mod P == p, so the shards of one campaign fall in
// consecutive parts (S <= P shards, S different parts) and campaigns of
// one shard spread over the parts instead of all landing in part 0.
//
// A worker with a PartHolder settles the streams of the shards whose part it
// holds. The steps that concern a whole campaign (finishing transfers
// between shards, the close on time, the refund, retire and reconcile,
// dropping an id whose meta is gone) are run by the holder of the part of
// shard 0, the root, alone. The refund decides from its own reads (every
// shard closed, then every stream drained, read after the close), so it
// waits for the other processes' parts whatever the timing.
//
// Exactly-once holds whoever settles a stream, one process or two at once
// (a holder that has not noticed yet that it lost a part): the ledger
// keeps a grant once by (campaign, seq) and an acknowledgement twice is
// one. A process that takes a part takes over at once, on its first pass,
// every entry pending at another consumer on that part's streams
// (XAUTOCLAIM with no minimum idle time), rather than after
// Config.ReclaimIdle: those entries were the previous holder's, and a
// holder that is still alive only replays what the ledger has.

// PartHolder tells a worker which parts of the deployment it holds.
type PartHolder interface {
	// Parts is the deployment's number of parts P (at least 1).
	Parts() int
	// Held says whether this process holds part p now and the term of
	// that holding: a number that changes when another process held the
	// part in between (a lease's fencing token).
	Held(p int) (term int64, ok bool)
}

// PartOf returns the part, of parts, that holds shard k of campaign id
// (red packet or discount campaign).
func PartOf(id string, k, parts int) int {
	if parts <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int((uint64(h.Sum32()) + uint64(k)) % uint64(parts))
}

// holds says whether this worker settles shard k of campaign id, and the
// term of the part that holds it (0 without a PartHolder: every shard, and no
// takeover sweep).
func (w *Worker) holds(id string, k int) (term int64, ok bool) {
	o := w.cfg.Parts
	if o == nil {
		return 0, true
	}
	return o.Held(PartOf(id, k, o.Parts()))
}

// elsewhere counts, while Drain runs with a PartHolder, the entries of shard
// k's stream still to settle by the process that holds its part: a drain
// ends when nothing is left anywhere, not only in its own parts.
func (w *Worker) elsewhere(ctx context.Context, k redisstore.Keys) (int64, error) {
	if !w.draining.Load() {
		return 0, nil
	}
	g, err := w.store.Group(ctx, k)
	if err != nil {
		return 0, err
	}
	return g.Lag + g.Pending, nil
}

// sweep takes over, once per term of the part, every entry of shard sh's
// stream pending at another consumer, whatever its idle time, and settles
// it: the previous holder of the part is dead, or settles only what the
// ledger already holds.
func (w *Worker) sweep(ctx context.Context, sh shard) (work int, err error) {
	if sh.term == 0 {
		return 0, nil
	}
	w.mu.Lock()
	done := w.swept[streamOf(sh)] == sh.term
	w.mu.Unlock()
	if done {
		return 0, nil
	}
	start := "0-0"
	for {
		next, claimed, deleted, err := w.store.AutoClaim(ctx, sh.keys, w.cfg.Consumer, 0, start, w.cfg.ReadCount)
		if err != nil {
			return work, err
		}
		if len(deleted) > 0 {
			w.tell(&w.deleted, hongbao.SettleDeleted, sh.id, int64(len(deleted)), nil)
			w.log.Error("ALARM: pending entries were deleted from the stream before settling",
				"campaign", sh.id, "shard", sh.keys.Tag, "ids", deleted)
		}
		if len(claimed) > 0 {
			if err := w.settleEntries(ctx, sh, claimed); err != nil {
				return work, err
			}
			work += len(claimed)
		}
		if next == "0-0" || next == "" {
			break
		}
		start = next
	}
	w.mu.Lock()
	w.swept[streamOf(sh)] = sh.term
	w.mu.Unlock()
	return work, nil
}
