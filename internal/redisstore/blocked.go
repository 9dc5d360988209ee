package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// blockedScanCount is the COUNT hint of each HSCAN of a blocked users'
// hash: one call does a bounded amount of work in Redis, whatever the
// number of users a campaign blocks.
const blockedScanCount = 500

// BlockedCounts reads how many users each shard blocks, in shards' order,
// in one round trip: the size of its hash less the placeholder field that
// keeps the hash in existence (block.lua, activate.lua).
func (s *Store) BlockedCounts(ctx context.Context, shards []Keys) ([]int64, error) {
	cmds := make(rueidis.Commands, 0, 2*len(shards))
	for _, k := range shards {
		cmds = append(cmds, s.c.B().Hlen().Key(k.Blocked).Build(), s.c.B().Hexists().Key(k.Blocked).Field("").Build())
	}
	res := s.c.DoMulti(ctx, cmds...)
	out := make([]int64, len(shards))
	for i, k := range shards {
		n, err := res[2*i].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("blocked users %s: %w", k.Tag, err)
		}
		placeholder, err := res[2*i+1].AsBool()
		if err != nil {
			return nil, fmt.Errorf("blocked users %s: %w", k.Tag, err)
		}
		if placeholder {
			n--
		}
		out[i] = max(n, 0)
	}
	return out, nil
}

// BlockedScan reads a stretch of the users one shard blocks: one HSCAN
// from cursor (0 starts), with a bounded COUNT hint. It answers the users
// read, in Redis's scan order, and the cursor to go on from, 0 once the
// hash was walked through. As any SCAN, a user blocked during a whole
// walk is read at least once, and may be read twice if the hash is
// resized meanwhile.
func (s *Store) BlockedScan(ctx context.Context, k Keys, cursor uint64) ([]BlockedUser, uint64, error) {
	e, err := s.c.Do(ctx, s.c.B().Hscan().Key(k.Blocked).Cursor(cursor).Count(blockedScanCount).Build()).AsScanEntry()
	if err != nil {
		return nil, 0, fmt.Errorf("blocked users %s: %w", k.Tag, err)
	}
	if len(e.Elements)%2 != 0 {
		return nil, 0, fmt.Errorf("blocked users %s: %w: a scan reply of %d elements", k.Tag, ErrCorrupt, len(e.Elements))
	}
	out := make([]BlockedUser, 0, len(e.Elements)/2)
	for i := 0; i < len(e.Elements); i += 2 {
		u, v := e.Elements[i], e.Elements[i+1]
		if u == "" {
			continue // the placeholder
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("blocked users %s: %w: user %q since %q", k.Tag, ErrCorrupt, u, v)
		}
		out = append(out, BlockedUser{User: u, Since: ms})
	}
	return out, e.Cursor, nil
}
