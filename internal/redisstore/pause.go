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

// NewestPause reads the newest generation any of shards holds (their
// pause_applied; 0 when none holds one), which a call passes to PauseGen
// as above before its first write. It reads the shards one at a time,
// pipelined, not at one instant: a generation written after a shard was
// read was taken before the call's (from the root's counter, which only
// grows) or after it, never lost.
func (s *Store) NewestPause(ctx context.Context, shards []Keys) (int64, error) {
	cmds := make(rueidis.Commands, 0, len(shards))
	for _, k := range shards {
		cmds = append(cmds, s.c.B().Hget().Key(k.Meta).Field("pause_applied").Build())
	}
	newest := int64(0)
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("pause generation of %s: %w", shards[i].Tag, err)
		}
		g, err := strconv.ParseInt(v, 10, 64)
		if err != nil || g < 0 {
			return 0, fmt.Errorf("pause generation of %s: %w: pause_applied %q", shards[i].Tag, ErrCorrupt, v)
		}
		newest = max(newest, g)
	}
	return newest, nil
}

// PauseGen runs pause_gen.lua on root, the meta of a campaign's (a
// discount campaign's) root: it takes the generation of a new pause or
// resume, to pass to Pause on every shard, above the root's counter and
// above (0, or what NewestPause read from the shards: it lifts a counter
// that fell behind them, as one of a root rebuilt without its meta does).
// Generations only grow, so the call that took the later one started
// later. ErrNoCampaign when the campaign does not exist or is loading.
// Under WithWait it answers once the replicas hold it (else an
// *UnknownError): a failover that undid it would hand the same generation
// to the next call.
func (s *Store) PauseGen(ctx context.Context, root Keys, above int64) (int64, error) {
	r, werr := s.exec(ctx, WaitPause, s.s.pauseGen, []string{root.Meta}, []string{i64(above)})
	gen, err := r.AsInt64()
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, resultError("pause generation "+root.Tag, err)
	}
	return gen, nil
}

// PauseReply is what pause.lua answers about one shard.
type PauseReply struct {
	State   string
	Paused  bool // the shard is paused after the call
	Changed bool // this call paused or resumed it
	// Applied: the generation was newer than any written on the shard, so
	// the call wrote it; false when a newer call (or this one) did before.
	Applied bool
	Newest  int64 // the generation the shard holds after the call
}

// Pause runs pause.lua on one shard (of a campaign, or a discount
// campaign's Keys view) for the call of generation gen (from PauseGen):
// paused true pauses its grabs (reserves), false resumes them, unless a
// call of a newer generation wrote the shard before, which this one
// leaves as it is (Applied false). Both directions are idempotent.
// ErrNoCampaign when the shard does not exist or is loading. Under
// WithWait it answers once the replicas hold the flag (a call that wrote
// nothing, once they hold the earlier write), else an *UnknownError: a
// pause that a failover could undo is never reported done.
func (s *Store) Pause(ctx context.Context, k Keys, paused bool, gen int64) (PauseReply, error) {
	arg := "0"
	if paused {
		arg = "1"
	}
	r, werr := s.execSync(ctx, WaitPause, s.s.pause, []string{k.Meta}, []string{arg, i64(gen)}, s.syncOf(k.Meta, pauseSilent))
	vals, err := r.ToArray()
	if err == nil {
		err = werr
	}
	if err != nil {
		return PauseReply{}, resultError("pause "+k.Tag, err)
	}
	if len(vals) != 5 {
		return PauseReply{}, fmt.Errorf("pause %s: reply of %d elements", k.Tag, len(vals))
	}
	var out PauseReply
	out.State, _ = vals[0].ToString()
	p, _ := vals[1].AsInt64()
	c, _ := vals[2].AsInt64()
	a, _ := vals[3].AsInt64()
	out.Newest, _ = vals[4].AsInt64()
	out.Paused, out.Changed, out.Applied = p == 1, c == 1, a == 1
	return out, nil
}

// pauseSilent: pause.lua refused an older generation and wrote nothing.
func pauseSilent(r rueidis.RedisResult) bool {
	vals, err := r.ToArray()
	if err != nil || len(vals) != 5 {
		return false
	}
	applied, err := vals[3].AsInt64()
	return err == nil && applied == 0
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
