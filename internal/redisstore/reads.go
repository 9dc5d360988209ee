package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
)

// Held reads the packet user holds on shard k (the root of a campaign, or
// the user's home shard); held is false when the user holds none there.
// shards is the campaign's shard count as that shard's meta records it
// (1 when it records none): a caller that asked the root about a user of
// a sharded campaign asks again at the user's home. It is ErrNoCampaign
// when the shard does not exist or is still loading.
//
// Two reads in one round trip, not a script: a claim is written only after
// the campaign left loading and is never changed or removed while the
// campaign lives (its keys expire together, after settlement), so a
// script running between the two reads cannot make them disagree.
//
// Under WAIT (WithWait) a packet is answered only once the replicas hold
// it: the two reads, a write of the shard's sync key and WAIT go out in
// one round trip on one connection (luascript.DoWait), so the replicas
// that acknowledged the write hold the claim the reads found; when fewer
// acknowledged, a held packet is an *UnknownError (a user told of a
// packet no replica holds could see it granted to someone else after a
// failover). A user who holds none is answered so either way (the short
// WAIT is counted all the same, under WaitHeld).
func (s *Store) Held(ctx context.Context, k Keys, user string) (seq, cents int64, shards int, held bool, err error) {
	reads := func() []rueidis.Completed {
		return []rueidis.Completed{
			s.c.B().Hmget().Key(k.Meta).Field("state", "shards").Build(),
			s.c.B().Hget().Key(k.Claims).Field(user).Build(),
		}
	}
	var res []rueidis.RedisResult
	var werr error
	if s.waitN == 0 {
		res = s.c.DoMulti(ctx, reads()...)
	} else {
		res, werr = luascript.DoWait(ctx, s.c, func() []rueidis.Completed { return append(reads(), s.syncWrite(k.Sync)()) },
			k.Sync, s.waitN, s.waitMs)
		werr = s.countShort(WaitHeld, werr)
	}
	seq, cents, shards, held, err = heldOf(res, user)
	if err == nil && held && werr != nil {
		return 0, 0, 0, false, resultError("held", werr)
	}
	return seq, cents, shards, held, err
}

// heldOf reads the replies of Held's two reads.
func heldOf(res []rueidis.RedisResult, user string) (seq, cents int64, shards int, held bool, err error) {
	m, err := res[0].ToArray()
	if err != nil || len(m) != 2 {
		return 0, 0, 0, false, fmt.Errorf("held: %w", err)
	}
	state, serr := m[0].ToString()
	if serr != nil || state == "loading" {
		return 0, 0, 0, false, fmt.Errorf("held: %w", ErrNoCampaign)
	}
	shards = 1
	if v, err := m[1].AsInt64(); err == nil && v > 1 {
		shards = int(v)
	}
	claim, err := res[1].ToString()
	if rueidis.IsRedisNil(err) {
		return 0, 0, shards, false, nil
	}
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("held: %w", err)
	}
	seq, cents, err = ParseClaim(claim)
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("held: user %q: %w", user, err)
	}
	return seq, cents, shards, true, nil
}

// Backlog is the settlement work left on a campaign's grants stream.
type Backlog struct {
	GroupState
	// OldestAge is how long the oldest entry not yet settled (pending or
	// undelivered) has been in the stream, by the Redis clock; 0 when
	// there is none.
	OldestAge time.Duration
}

// Backlog reads the settle group's state and the age of its oldest
// unsettled entry. It is ErrNoCampaign when the campaign has no grants
// stream (it does not exist or is still loading).
func (s *Store) Backlog(ctx context.Context, k Keys) (Backlog, error) {
	cmds := append([]rueidis.Completed{
		s.c.B().Exists().Key(k.Grants).Build(),
		s.c.B().Time().Build(),
	}, s.groupCmds(k)...)
	res := s.c.DoMulti(ctx, cmds...)
	n, err := res[0].AsInt64()
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", k.Tag, err)
	}
	if n == 0 {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", k.Tag, ErrNoCampaign)
	}
	now, err := redisNow(res[1])
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", k.Tag, err)
	}
	g, err := groupState(k.Tag, res[2:])
	if err != nil {
		return Backlog{}, err
	}
	b := Backlog{GroupState: g}
	// Pending entries all come before the last delivered one, and the
	// undelivered ones after it: the oldest unsettled entry is the oldest
	// pending one, or else the first after the last delivered.
	oldest := g.MinPending
	if oldest == "" && g.Lag > 0 {
		start := "-"
		if g.LastDelivered != "" && g.LastDelivered != "0-0" {
			start = "(" + g.LastDelivered
		}
		es, err := s.c.Do(ctx, s.c.B().Xrange().Key(k.Grants).Start(start).End("+").Count(1).Build()).AsXRange()
		if err != nil {
			return Backlog{}, fmt.Errorf("backlog of %s: %w", k.Tag, err)
		}
		if len(es) == 1 {
			oldest = es[0].ID
		}
	}
	if oldest != "" {
		ms, _ := splitID(oldest)
		if age := now - int64(ms); age > 0 {
			b.OldestAge = time.Duration(age) * time.Millisecond
		}
	}
	return b, nil
}

// Now reads the Redis clock, in ms since the epoch.
func (s *Store) Now(ctx context.Context) (int64, error) {
	ms, err := redisNow(s.c.Do(ctx, s.c.B().Time().Build()))
	if err != nil {
		return 0, fmt.Errorf("now: %w", err)
	}
	return ms, nil
}

// redisNow reads a TIME reply as milliseconds since the epoch.
func redisNow(r rueidis.RedisResult) (int64, error) {
	t, err := r.AsIntSlice()
	if err != nil || len(t) != 2 {
		return 0, fmt.Errorf("TIME: %w: reply %v", ErrCorrupt, err)
	}
	return t[0]*1000 + t[1]/1000, nil
}
