package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"
)

// MaxBlockBatch is the most users one block.lua call takes.
const MaxBlockBatch = 1000

// Pause runs pause.lua on one shard (of a campaign, or a discount
// campaign's Keys view): paused true pauses its grabs (reserves), false
// resumes them. It returns the shard's state and whether this call
// changed anything; both directions are idempotent. ErrNoCampaign when
// the shard does not exist or is loading. Under WithWait it answers once
// the replicas hold the flag (a repeat that changed nothing, once they
// hold the earlier write), else an *UnknownError: a pause that a failover
// could undo is never reported done.
func (s *Store) Pause(ctx context.Context, k Keys, paused bool) (state string, changed bool, err error) {
	arg := "0"
	if paused {
		arg = "1"
	}
	r, werr := s.execSync(ctx, WaitPause, s.s.pause, []string{k.Meta}, []string{arg}, s.syncOf(k.Meta, pauseSilent))
	vals, err := r.ToArray()
	if err == nil {
		err = werr
	}
	if err != nil {
		return "", false, resultError("pause "+k.Tag, err)
	}
	if len(vals) != 3 {
		return "", false, fmt.Errorf("pause %s: reply of %d elements", k.Tag, len(vals))
	}
	state, _ = vals[0].ToString()
	c, _ := vals[2].AsInt64()
	return state, c == 1, nil
}

// pauseSilent: pause.lua found the shard as asked and wrote nothing.
func pauseSilent(r rueidis.RedisResult) bool {
	vals, err := r.ToArray()
	if err != nil || len(vals) != 3 {
		return false
	}
	changed, err := vals[2].AsInt64()
	return err == nil && changed == 0
}

// Block runs block.lua on one shard: add true blocks users (1..MaxBlockBatch,
// all homed on this shard), false unblocks them. It returns how many
// users the call added (removed) and how many the shard blocks after it.
// It always writes (the size in meta), so under WithWait its WAIT covers
// the users blocked before too.
func (s *Store) Block(ctx context.Context, k Keys, add bool, users []string) (changed, size int64, err error) {
	arg := "0"
	if add {
		arg = "1"
	}
	r, werr := s.exec(ctx, WaitBlock, s.s.block, []string{k.Meta, k.Blocked}, append([]string{arg}, users...))
	vals, err := r.AsIntSlice()
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, 0, resultError("block "+k.Tag, err)
	}
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("block %s: reply of %d values", k.Tag, len(vals))
	}
	return vals[0], vals[1], nil
}

// BlockedUser is one user a shard blocks, and since when (ms, Redis
// clock).
type BlockedUser struct {
	User  string
	Since int64
}

// BlockedUsers reads the users one shard blocks, sorted by user id.
func (s *Store) BlockedUsers(ctx context.Context, k Keys) ([]BlockedUser, error) {
	m, err := s.c.Do(ctx, s.c.B().Hgetall().Key(k.Blocked).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("blocked users %s: %w", k.Tag, err)
	}
	out := make([]BlockedUser, 0, len(m))
	for u, v := range m {
		if u == "" {
			continue // the placeholder that keeps the hash in existence (activate.lua)
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("blocked users %s: %w: user %q since %q", k.Tag, ErrCorrupt, u, v)
		}
		out = append(out, BlockedUser{User: u, Since: ms})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out, nil
}
