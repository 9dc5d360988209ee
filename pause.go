package hongbao

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// MaxBlockUsers is the most users one Block or Unblock call takes.
const MaxBlockUsers = redisstore.MaxBlockBatch

// Pausing a campaign. Every shard keeps its own flag, read by the grab
// script (the reserve script) in the same call that would pop a packet,
// so a grab that runs on a shard after its flag is written is answered
// Paused, never granted; one that ran before was granted before the
// pause. Pause writes the shards one script each, the root last, and
// returns once all are written: while it runs, a grab on a shard not yet
// written may still be granted, and after it returns none is, on any
// shard, unless a Resume that started later has resumed it. Resume clears
// the root first and the others after it, so while it runs some shards
// may already grant and others still answer Paused.
//
// Each call first takes a generation from the root (a counter in its
// meta), and every shard, the root too, takes a call's write only if no
// call of a newer generation wrote it before: Pauses and Resumes that
// race (two operators, two consoles) leave every shard, once all have
// returned, as the call that started last (took the later generation)
// wants, never some paused and some not. A call never takes a second
// generation: an older call that finds a shard written by a newer one
// leaves it, goes on with the shards the newer one may not have reached
// yet (it will), and answers the campaign as it finds it, Overtaken. A
// call that took its generation again to write over a newer one would
// turn the newer call's answer into a lie: a Resume that started before a
// Pause but ran slower would resume the grabs after the Pause had told
// its operator "paused".
//
// The root's counter can fall behind the shards' generations: a root
// rebuilt without its meta starts it again at 0, and a failover can lose
// its last increments. Generations it would then hand out again are ones
// the shards already hold, and their writes would be refused as if a
// newer call had overtaken them. So a call first reads the newest
// generation the shards hold and takes its own above it as well as above
// the counter (which lifts the counter): a generation is then above every
// write made before the call started, and a write refused after that can
// only be a newer call's. The read is not atomic with the take; a write
// landing between them comes from a call that took its generation before
// this one's (the counter only grows), so it is below this one's anyway.
//
// Status.Paused reads the root's flag and Status.PausedShards counts the
// shards that hold one: after a Pause or Resume that failed (or crashed)
// half way the two disagree until a call is repeated, and calling it
// again finishes it (both are idempotent; the repeat takes a new
// generation). The window and close apply as ever: a paused campaign
// closes on time, is refunded and settles; closing one works. Grants made
// before a pause settle as usual; a pause moves no money.

// Pause stops the grabs of campaign id until Resume: every user who holds
// no packet is answered Paused, without touching the pool; holders still
// get theirs (Already). Pausing a paused campaign changes nothing.
func (e *Engine) Pause(ctx context.Context, id string) (*Status, error) {
	overtaken, err := e.pause(ctx, kindRedPacket, "pause", id, true)
	return withOvertaken(ctx, id, overtaken, err, e.Status)
}

// Resume lets the grabs of a paused campaign id go on. Resuming a
// campaign that is not paused changes nothing.
func (e *Engine) Resume(ctx context.Context, id string) (*Status, error) {
	overtaken, err := e.pause(ctx, kindRedPacket, "resume", id, false)
	return withOvertaken(ctx, id, overtaken, err, e.Status)
}

// Pause stops the reservations of discount campaign id until
// Resume, as Engine.Pause does for a campaign: a new order is answered
// ReservePaused; an order's own reservation is answered as ever, and
// confirms and cancels go on.
func (ds Discounts) Pause(ctx context.Context, id string) (*DiscountStatus, error) {
	overtaken, err := ds.e.pause(ctx, kindDiscount, "pause discount", id, true)
	return withOvertaken(ctx, id, overtaken, err, ds.Status)
}

// Resume lets the reservations of a paused discount campaign go
// on.
func (ds Discounts) Resume(ctx context.Context, id string) (*DiscountStatus, error) {
	overtaken, err := ds.e.pause(ctx, kindDiscount, "resume discount", id, false)
	return withOvertaken(ctx, id, overtaken, err, ds.Status)
}

// pause pauses (or resumes) every shard of campaign id of kind k and says
// whether a later call overtook it.
func (e *Engine) pause(ctx context.Context, k *kind, op, id string, paused bool) (overtaken bool, err error) {
	if err := ValidateCampaignID(id); err != nil {
		return false, err
	}
	shards, err := k.shards(e, ctx, id)
	if err == nil {
		overtaken, err = pauseShards(ctx, e.store, shards, paused, e.pauseStep)
	}
	if err != nil {
		return false, opErr(op, id, mapStoreErr(err))
	}
	return overtaken, nil
}

// withOvertaken is the status a pause or resume answers: the campaign as
// status reads it after the call, Overtaken as the call found it.
func withOvertaken[S Status | DiscountStatus](ctx context.Context, id string, overtaken bool, err error, status func(context.Context, string) (*S, error)) (*S, error) {
	if err != nil {
		return nil, err
	}
	st, err := status(ctx, id)
	if err != nil {
		return nil, err
	}
	switch s := any(st).(type) {
	case *Status:
		s.Overtaken = overtaken
	case *DiscountStatus:
		s.Overtaken = overtaken
	}
	return st, nil
}

// pauseShards takes a generation above the shards' newest and the root's
// counter, then pauses every shard, the root last, or resumes them, the
// root first: the root's flag, which Status reports, is set only after
// every other shard's and cleared before them. It answers overtaken when
// a shard refused the write: a call that started later wrote it, and the
// campaign is as that call wants. step, when not nil, runs after the
// generation is taken and after each shard written (tests hold a call
// there).
func pauseShards(ctx context.Context, s *redisstore.Store, shards []redisstore.Keys, paused bool, step func(int)) (overtaken bool, err error) {
	order := make([]redisstore.Keys, 0, len(shards))
	order = append(order, shards[1:]...)
	if paused {
		order = append(order, shards[0])
	} else {
		order = append([]redisstore.Keys{shards[0]}, order...)
	}
	newest, err := s.NewestPause(ctx, shards)
	if err != nil {
		return false, err
	}
	gen, err := s.PauseGen(ctx, shards[0], newest)
	if err != nil {
		return false, err
	}
	if step != nil {
		step(0)
	}
	for i, k := range order {
		r, err := s.Pause(ctx, k, paused, gen)
		if err != nil {
			return overtaken, err
		}
		// A shard the newer call has not reached yet still takes this
		// write: the newer call writes it after.
		overtaken = overtaken || !r.Applied
		if step != nil {
			step(i + 1)
		}
	}
	return overtaken, nil
}

// BlockedUser is a user an operator blocked on a campaign.
type BlockedUser struct {
	User string
	// Since is when the user was first blocked (Redis clock).
	Since time.Time
}

// Blocking users. A campaign keeps its blocked users on their home
// shards, next to their claims, so the grab script (the reserve script)
// decides from the user's own shard, in the call that would grant: a grab
// after Block returns is answered Blocked (ReserveBlocked), unless the
// user already holds a packet (Already: a grant made is not taken back).
// A campaign that blocks nobody skips the read (a counter in each
// shard's meta says so).

// Block blocks users (1..MaxBlockUsers ids) on campaign id and returns
// how many were not blocked before. Blocking twice is not an error.
func (e *Engine) Block(ctx context.Context, id string, users []string) (int, error) {
	return e.blockUsers(ctx, "block", id, kindRedPacket, users, true)
}

// Unblock lets users grab campaign id again and returns how many were
// blocked.
func (e *Engine) Unblock(ctx context.Context, id string, users []string) (int, error) {
	return e.blockUsers(ctx, "unblock", id, kindRedPacket, users, false)
}

// BlockedUsers lists the users blocked on campaign id, by user id.
func (e *Engine) BlockedUsers(ctx context.Context, id string) ([]BlockedUser, error) {
	return e.blockedUsers(ctx, "blocked users", id, kindRedPacket)
}

// Block blocks users on discount campaign id, as Block does:
// their new orders are answered ReserveBlocked.
func (ds Discounts) Block(ctx context.Context, id string, users []string) (int, error) {
	return ds.e.blockUsers(ctx, "block discount", id, kindDiscount, users, true)
}

// Unblock lets users reserve discounts of campaign id again.
func (ds Discounts) Unblock(ctx context.Context, id string, users []string) (int, error) {
	return ds.e.blockUsers(ctx, "unblock discount", id, kindDiscount, users, false)
}

// BlockedUsers lists the users blocked on discount campaign id.
func (ds Discounts) BlockedUsers(ctx context.Context, id string) ([]BlockedUser, error) {
	return ds.e.blockedUsers(ctx, "discount blocked users", id, kindDiscount)
}

func (e *Engine) blockUsers(ctx context.Context, op, id string, k *kind, users []string, add bool) (int, error) {
	if err := ValidateCampaignID(id); err != nil {
		return 0, err
	}
	if len(users) < 1 || len(users) > MaxBlockUsers {
		return 0, opErr(op, id, fmt.Errorf("%w: %d users, want 1..%d", ErrInvalidID, len(users), MaxBlockUsers))
	}
	for _, u := range users {
		if err := ValidateUserID(u); err != nil {
			return 0, err
		}
	}
	shards, err := k.shards(e, ctx, id)
	if err != nil {
		return 0, opErr(op, id, mapStoreErr(err))
	}
	homed := make([][]string, len(shards))
	for _, u := range users {
		k := HomeShard(u, len(shards))
		homed[k] = append(homed[k], u)
	}
	total := 0
	for k, us := range homed {
		if len(us) == 0 {
			continue
		}
		n, _, err := e.store.Block(ctx, shards[k], add, us)
		if err != nil {
			return total, opErr(op, id, mapStoreErr(err))
		}
		total += int(n)
	}
	return total, nil
}

func (e *Engine) blockedUsers(ctx context.Context, op, id string, k *kind) ([]BlockedUser, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	shards, err := k.shards(e, ctx, id)
	if err != nil {
		return nil, opErr(op, id, mapStoreErr(err))
	}
	var out []BlockedUser
	for _, k := range shards {
		us, err := e.store.BlockedUsers(ctx, k)
		if err != nil {
			return nil, opErr(op, id, err)
		}
		for _, u := range us {
			out = append(out, BlockedUser{User: u.User, Since: time.UnixMilli(u.Since)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out, nil
}
