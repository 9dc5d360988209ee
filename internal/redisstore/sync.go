package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
)

// syncTTL is how long the key SyncReplicas writes lives.
const syncTTL = time.Minute

// SyncReplicas returns once replicas replicas hold every write applied in
// shard k's slot so far, every grant in its stream included, or fails
// with an *UnknownError wrapping a *luascript.ShortWaitError when fewer
// acknowledged them within timeout.
//
// WAIT waits for the writes of its own connection only: for the offset
// of the replication stream at that connection's last write, and on a
// connection that wrote nothing it answers at once, counting replicas
// that may lack every grant. The grants were written by the engine, on
// other connections; the worker's reads of them may or may not count as
// writes (XREADGROUP of new entries writes the group's state; on Redis
// 7.0 a read of one's own pending history and XAUTOCLAIM propagate the
// delivery counts too, but that is the server's business, and the
// connection the reads went out on need not be the one WAIT goes out
// on). So SyncReplicas writes a small key in the shard's slot first
// (k.Sync, expiring), then sends WAIT right behind it on the same
// connection, in one round trip: Redis orders all writes of a node in one
// replication stream, so the replicas that acknowledged that write hold
// every grant written before it, the ones just read among them. On a
// cluster both commands go to the shard's node, on a connection of its
// own (luascript.WriteWait).
func (s *Store) SyncReplicas(ctx context.Context, k Keys, replicas int, timeout time.Duration) error {
	write := func() rueidis.Completed { return s.c.B().Set().Key(k.Sync).Value("1").Px(syncTTL).Build() }
	err := luascript.WriteWait(ctx, s.c, write, k.Sync, int64(replicas), max(timeout.Milliseconds(), 1))
	return resultError("sync replicas of "+k.Tag, err)
}
