package redisstore

import (
	"context"
	"strings"
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
	err := luascript.WriteWait(ctx, s.c, s.syncWrite(k.Sync), k.Sync, int64(replicas), max(timeout.Milliseconds(), 1))
	return resultError("sync replicas of "+k.Tag, err)
}

// syncOwn is SyncReplicas with the store's own WAIT setting (WithWait),
// a WAIT that falls short counted under op.
func (s *Store) syncOwn(ctx context.Context, op WaitOp, k Keys) error {
	return s.countShort(op, s.SyncReplicas(ctx, k, int(s.waitN), time.Duration(s.waitMs)*time.Millisecond))
}

// syncWrite builds the write of sync key key that goes before a WAIT.
func (s *Store) syncWrite(key string) func() rueidis.Completed {
	return func() rueidis.Completed { return s.c.B().Set().Key(key).Value("1").Px(syncTTL).Build() }
}

// Answers that rest on earlier writes. Under WAIT (WithWait) every answer
// that reports a grant, a reservation or a confirmation is given only
// once the replicas hold it. A batch script that wrote something
// propagated its writes after every earlier write of its node, so the
// WAIT behind it covers what it answered from earlier writes too (the
// ALREADY of a batch that also granted). A batch that wrote nothing
// moved no replication offset on Redis 7.2 and later, and its WAIT vouches
// for nothing there (see package luascript): then the shard's sync key is
// written and WAIT sent again, on the connection that ran the script.
// That costs a second round trip, only for such batches (retries, as a
// rule); the hot path, a batch that grants, stays one.

// syncOf is the follow-up of a batch script whose first key is key under
// WAIT: silent says from its reply whether it answered from earlier writes
// without writing. nil when the store does not wait.
func (s *Store) syncOf(key string, silent func(rueidis.RedisResult) bool) *luascript.Sync {
	if s.waitN == 0 {
		return nil
	}
	return &luascript.Sync{Silent: silent, Write: s.syncWrite(syncKeyOf(key))}
}

// grabSilent: grab.lua answered ALREADY to someone and GRANTED to
// nobody, so it wrote nothing and reported grants written before.
func grabSilent(r rueidis.RedisResult) bool {
	vals, err := r.ToArray()
	if err != nil {
		return false
	}
	already := false
	for i := range vals {
		switch {
		case vals[i].IsString():
			return false // GRANTED: the script wrote
		case vals[i].IsArray():
			already = true
		}
	}
	return already
}

// discountSilent: a discount script answered some request from a record
// written before (ALREADY, CANCELLED, EXPIRED, CONFIRMED) and did nothing
// now for any (no code 1), so it may have written nothing. (A cancel that
// finds a reservation past its hold expires it now and answers EXPIRED:
// then the sync write is one more than needed, which is harmless.)
func discountSilent(r rueidis.RedisResult) bool {
	vals, err := r.AsIntSlice()
	if err != nil {
		return false
	}
	reported := false
	for i := 0; i+3 < len(vals); i += 4 {
		switch vals[i] {
		case DiscountReserved:
			return false
		case DiscountAlready, DiscountCancelled, DiscountExpired, DiscountConfirmed:
			reported = true
		}
	}
	return reported
}

// syncKeyOf is the sync key of the shard that key, any of its keys,
// belongs to: the one under the same hash tag.
func syncKeyOf(key string) string {
	i := strings.IndexByte(key, '{')
	j := strings.IndexByte(key[i+1:], '}')
	if i < 0 || j < 0 {
		return key + ":sync" // never: every key has a tag
	}
	return keysOfTag(key[:i], key[i+1:i+1+j]).Sync
}
