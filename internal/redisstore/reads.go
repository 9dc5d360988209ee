package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Held reads the packet user holds in campaign id; held is false when the
// user holds none. It is ErrNoCampaign when the campaign does not exist or
// is still loading.
//
// Two reads in one round trip, not a script: a claim is written only after
// the campaign left loading and is never changed or removed while the
// campaign lives (its keys expire together, after settlement), so a
// script running between the two reads cannot make them disagree.
func (s *Store) Held(ctx context.Context, id, user string) (seq, cents int64, held bool, err error) {
	k := CampaignKeys(id)
	res := s.c.DoMulti(ctx,
		s.c.B().Hget().Key(k.Meta).Field("state").Build(),
		s.c.B().Hget().Key(k.Claims).Field(user).Build(),
	)
	state, err := res[0].ToString()
	if rueidis.IsRedisNil(err) || (err == nil && state == "loading") {
		return 0, 0, false, fmt.Errorf("held: %w", ErrNoCampaign)
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("held: %w", err)
	}
	claim, err := res[1].ToString()
	if rueidis.IsRedisNil(err) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("held: %w", err)
	}
	seq, cents, err = ParseClaim(claim)
	if err != nil {
		return 0, 0, false, fmt.Errorf("held: user %q: %w", user, err)
	}
	return seq, cents, true, nil
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
func (s *Store) Backlog(ctx context.Context, id string) (Backlog, error) {
	k := CampaignKeys(id)
	cmds := append([]rueidis.Completed{
		s.c.B().Exists().Key(k.Grants).Build(),
		s.c.B().Time().Build(),
	}, s.groupCmds(k)...)
	res := s.c.DoMulti(ctx, cmds...)
	n, err := res[0].AsInt64()
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", id, err)
	}
	if n == 0 {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", id, ErrNoCampaign)
	}
	now, err := redisNow(res[1])
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of %s: %w", id, err)
	}
	g, err := groupState(id, res[2:])
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
			return Backlog{}, fmt.Errorf("backlog of %s: %w", id, err)
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

// redisNow reads a TIME reply as milliseconds since the epoch.
func redisNow(r rueidis.RedisResult) (int64, error) {
	t, err := r.AsIntSlice()
	if err != nil || len(t) != 2 {
		return 0, fmt.Errorf("TIME: %w: reply %v", ErrCorrupt, err)
	}
	return t[0]*1000 + t[1]/1000, nil
}
