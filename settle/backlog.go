package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// ErrNoCampaign: the campaign does not exist in Redis, or is still
// loading.
var ErrNoCampaign = errors.New("settle: no such campaign")

// Backlog is what settlement has left to do on one campaign. Counts are of
// grant batches (one per grab call of the engine, holding up to its
// MaxBatch grants), as the workers take them.
type Backlog struct {
	// Lag counts batches not yet handed to a worker.
	Lag int64
	// Pending counts batches handed to a worker and not yet in the
	// ledger (or sink).
	Pending int64
	// Dead counts batches a worker gave up on (conflicts, malformed
	// grants): they wait for an operator to redrive them.
	Dead int64
	// Oldest is how long the oldest batch not yet settled (lagging or
	// pending) has waited, by the Redis clock; 0 when there is none.
	Oldest time.Duration
}

// Unsettled counts the batches not yet settled: Lag + Pending.
func (b Backlog) Unsettled() int64 { return b.Lag + b.Pending }

// ReadBacklog reads the settlement backlog of campaign id of namespace
// ("" for the default, see Config.Namespace) from Redis,
// summed over its shards (Oldest is the oldest of any shard). It is
// ErrNoCampaign when the campaign does not exist or is still loading. It
// only reads, and may run while workers settle.
func ReadBacklog(ctx context.Context, rc rueidis.Client, namespace, id string) (Backlog, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return Backlog{}, err
	}
	shards := []redisstore.Keys{store.NS().CampaignKeys(id)}
	if v, err := store.Read(ctx, id); err == nil {
		shards = v.Shards
	}
	var out Backlog
	for _, k := range shards {
		b, err := store.Backlog(ctx, k)
		if errors.Is(err, redisstore.ErrNoCampaign) {
			return Backlog{}, fmt.Errorf("%w: %s", ErrNoCampaign, id)
		}
		if err != nil {
			return Backlog{}, fmt.Errorf("settle: %w", err)
		}
		out.Lag += b.Lag
		out.Pending += b.Pending
		out.Dead += b.Dead
		out.Oldest = max(out.Oldest, b.OldestAge)
	}
	return out, nil
}

// Redrive puts the dead grants of campaign id of namespace back into its grants
// streams (one per shard), for an operator who fixed their cause, and
// returns how many entries moved; a worker settles them on its next pass.
// Each step moves a group of entries in one script, so a grant is never in
// both streams or in neither, and it is safe while workers run. It is
// ErrNoCampaign when the campaign does not exist. Worker.Redrive does the
// same through a worker's store.
func Redrive(ctx context.Context, rc rueidis.Client, namespace, id string) (int64, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return 0, err
	}
	v, err := store.Read(ctx, id)
	if errors.Is(err, redisstore.ErrNoCampaign) {
		return 0, fmt.Errorf("%w: %s", ErrNoCampaign, id)
	}
	if err != nil {
		return 0, fmt.Errorf("settle: redrive %s: %w", id, err)
	}
	var total int64
	for _, k := range v.Shards {
		n, err := store.Redrive(ctx, k)
		total += n
		if err != nil {
			return total, fmt.Errorf("settle: redrive %s: %w", id, err)
		}
	}
	return total, nil
}

// storeOf is a store on rc for the keys of namespace ("" for the
// default; see Config.Namespace).
func storeOf(rc rueidis.Client, namespace string) (*redisstore.Store, error) {
	ns, err := redisstore.ParseNamespace(namespace)
	if err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	return redisstore.New(rc).WithNamespace(ns), nil
}
