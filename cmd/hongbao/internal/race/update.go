package race

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/atomicop"
)

// UpdateSide is what one approach got wrong in update-if-newer.
type UpdateSide struct {
	// StaleKeys counts keys whose stored version is not the newest sent.
	StaleKeys int64 `json:"stale_keys"`
	// AggregateDrift is the sum over statuses of |summary - recount of the
	// stored records|.
	AggregateDrift int64 `json:"aggregate_drift"`
}

var statuses = []string{"online", "offline", "charging", "idle", "error"}

const (
	summary = "by-status"
	// baseVersion makes versions look like event times in ms.
	baseVersion = 1_700_000_000_000
)

type updateOp struct {
	key     int32
	status  int32
	version int64
}

// updateWorkload returns the updates in the order they are sent: each
// has a version one above the one generated before it, but they are sent
// shuffled within windows, as data that takes different paths arrives.
func updateWorkload(cfg Config) []updateOp {
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 1))
	ops := make([]updateOp, cfg.Ops)
	for i := range ops {
		ops[i] = updateOp{key: int32(rng.IntN(cfg.Keys)), status: int32(rng.IntN(len(statuses))), version: baseVersion + int64(i)}
	}
	const window = 256
	for lo := 0; lo < len(ops); lo += window {
		w := ops[lo:min(lo+window, len(ops))]
		rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	return ops
}

// device names record k. All records share the hash tag {devices}, so
// they and their summary live in one slot.
func device(k int) string { return "{devices}dev-" + strconv.Itoa(k) }

// naiveUpdater is update-if-newer as usually first written: read the
// stored version, write when newer, then move the summary count. Each step
// is atomic; the sequence is not.
type naiveUpdater struct {
	c      rueidis.Client
	prefix string
}

func (n naiveUpdater) recordKey(k int) string { return n.prefix + device(k) }
func (n naiveUpdater) summaryKey() string     { return n.prefix + "{devices}:" + summary }

func (n naiveUpdater) update(ctx context.Context, op updateOp) error {
	key := n.recordKey(int(op.key))
	vals, err := n.c.Do(ctx, n.c.B().Hmget().Key(key).Field(atomicop.VersionField, "status").Build()).ToArray()
	if err != nil {
		return err
	}
	if len(vals) != 2 {
		return fmt.Errorf("naive update: HMGET answered %d values", len(vals))
	}
	if stored, err := vals[0].AsInt64(); err == nil && op.version <= stored {
		return nil
	}
	old, _ := vals[1].ToString()
	status := statuses[op.status]
	ver := strconv.FormatInt(op.version, 10)
	if err := n.c.Do(ctx, n.c.B().Hset().Key(key).FieldValue().FieldValue(atomicop.VersionField, ver).FieldValue("status", status).FieldValue("seen", ver).Build()).Error(); err != nil {
		return err
	}
	if old == status {
		return nil
	}
	if old != "" {
		if err := n.c.Do(ctx, n.c.B().Hincrby().Key(n.summaryKey()).Field(old).Increment(-1).Build()).Error(); err != nil {
			return err
		}
	}
	return n.c.Do(ctx, n.c.B().Hincrby().Key(n.summaryKey()).Field(status).Increment(1).Build()).Error()
}

// Update runs both approaches at once over the same workload and counts
// their errors.
func Update(ctx context.Context, c rueidis.Client, prefix string, cfg Config) (naive, ours UpdateSide, err error) {
	ops := updateWorkload(cfg)
	maxSent := make([]int64, cfg.Keys)
	for i := range maxSent {
		maxSent[i] = -1
	}
	for _, op := range ops {
		maxSent[op.key] = max(maxSent[op.key], op.version)
	}
	nv := naiveUpdater{c: c, prefix: prefix + "naive:"}
	v, err := atomicop.NewVersioned(c, &atomicop.VersionedConfig{Prefix: prefix + "hongbao:"})
	if err != nil {
		return naive, ours, err
	}
	agg := &atomicop.Aggregate{Summary: summary, Field: "status"}
	hongbao := func(ctx context.Context, op updateOp) error {
		ver := strconv.FormatInt(op.version, 10)
		_, err := v.Update(ctx, atomicop.Update{
			Key: device(int(op.key)), Version: op.version, Aggregate: agg,
			Fields: map[string]string{"status": statuses[op.status], "seen": ver},
		})
		return err
	}
	if err := applyAll(ctx, cfg.Workers, ops, nv.update, hongbao); err != nil {
		return naive, ours, err
	}
	if naive, err = nv.readBack(ctx, cfg.Keys, maxSent); err != nil {
		return naive, ours, err
	}
	ours, err = updateErrors(cfg.Keys, maxSent,
		func(k int) (int64, string, bool, error) {
			rec, ok, err := v.Get(ctx, device(k))
			return rec.Version, rec.Fields["status"], ok, err
		},
		func() (map[string]int64, error) { return v.Summary(ctx, device(0), summary) })
	return naive, ours, err
}

// applyAll applies every op with each side at once, each side with
// workers goroutines, and returns the first error.
func applyAll(ctx context.Context, workers int, ops []updateOp, sides ...func(context.Context, updateOp) error) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	var wg sync.WaitGroup
	for _, apply := range sides {
		var next atomic.Int64
		for range workers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(len(ops)) || rctx.Err() != nil {
						return
					}
					if err := apply(rctx, ops[i]); err != nil {
						fail.set(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if fail.err != nil {
		return fmt.Errorf("update-if-newer: %w", fail.err)
	}
	return ctx.Err()
}

// readBack reads the naive side's records and summary back and counts its
// errors.
func (n naiveUpdater) readBack(ctx context.Context, keys int, maxSent []int64) (UpdateSide, error) {
	c := n.c
	return updateErrors(keys, maxSent,
		func(k int) (int64, string, bool, error) {
			m, err := c.Do(ctx, c.B().Hgetall().Key(n.recordKey(k)).Build()).AsStrMap()
			if err != nil || m[atomicop.VersionField] == "" {
				return 0, "", false, err
			}
			ver, err := strconv.ParseInt(m[atomicop.VersionField], 10, 64)
			return ver, m["status"], true, err
		},
		func() (map[string]int64, error) {
			return c.Do(ctx, c.B().Hgetall().Key(n.summaryKey()).Build()).AsIntMap()
		})
}

// updateErrors compares the stored records with the newest version
// sent to each, and the summary with a recount of the records.
func updateErrors(keys int, maxSent []int64, get func(int) (int64, string, bool, error), readSummary func() (map[string]int64, error)) (UpdateSide, error) {
	var side UpdateSide
	recount := map[string]int64{}
	for k := range keys {
		ver, status, ok, err := get(k)
		if err != nil {
			return side, err
		}
		if !ok {
			if maxSent[k] >= 0 {
				side.StaleKeys++
			}
			continue
		}
		if ver != maxSent[k] {
			side.StaleKeys++
		}
		recount[status]++
	}
	sum, err := readSummary()
	if err != nil {
		return side, err
	}
	for s, n := range sum {
		side.AggregateDrift += abs64(n - recount[s])
	}
	for s, n := range recount {
		if _, ok := sum[s]; !ok {
			side.AggregateDrift += n
		}
	}
	return side, nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
