package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Rebuilding a campaign (package rebuild) goes through its shards in four
// steps, each one script or plain writes to keys nobody else uses:
//
//  1. Freeze (rebuild_freeze.lua): the shard goes to state loading under
//     the rebuild's token, so nothing grants, lends, closes or settles on
//     it any more, and the state it had is kept in meta (rebuild_from).
//  2. Read (ReadShard): everything that survived, now still.
//  3. Stage (Stage): the rebuilt pool, claims, grants to settle and lost
//     packets, written under keys named by the token (Keys.Staged).
//  4. Swap (rebuild_swap.lua) and activate (rebuild_activate.lua): the
//     staged keys replace the old ones and meta in one step, meta with
//     the ledger fence the rebuild raised (LedgerFence); then the shard
//     goes live, the root last.
//
// A rebuild cut short leaves its shards loading; run again, it freezes
// them under a new token (rebuild_from is kept) and reads what is there,
// swapped or not.

// stagedTTL is how long staged keys live should their rebuild die.
const stagedTTL = time.Hour

// FreezeForRebuild is step 1 on shard k. prior is the state the shard
// had before the first rebuild that froze it ("" when it did not exist:
// the freeze then leaves a meta of the rebuild's fields alone, which
// ShardContents.Found tells from a shard).
func (s *Store) FreezeForRebuild(ctx context.Context, k Keys, token string) (prior string, err error) {
	vals, err := s.s.rebuildFreeze.Exec(ctx, s.c, []string{k.Meta}, []string{token}).ToArray()
	if err != nil {
		return "", resultError("freeze "+k.Tag, err)
	}
	if len(vals) != 2 {
		return "", fmt.Errorf("freeze %s: reply of %d elements", k.Tag, len(vals))
	}
	prior, _ = vals[1].ToString()
	return prior, nil
}

// ShardContents is everything a rebuild reads of one frozen shard.
type ShardContents struct {
	Meta      map[string]string // all of meta; empty when it does not exist
	Pool      []string          // packets, head to tail
	Claims    map[string]string // user -> packet
	Grants    []StreamGrant     // the grants stream, in order
	Transfers []Transfer        // transfer records out of the shard
	Applied   map[string]bool   // transfers the shard received
	Lost      []string          // packets an earlier rebuild found lost
	// Blocklist says the blocked users' hash exists: every live shard
	// holds it (its placeholder at least), so a shard without it lost
	// its blocked users with the rest.
	Blocklist bool
}

// Found says whether the shard held a campaign's shard (a live one, or
// one an earlier rebuild swapped in) rather than nothing or the shell a
// freeze leaves where nothing was: every such meta counts its grants.
func (c *ShardContents) Found() bool {
	_, ok := c.Meta["granted_count"]
	return ok
}

// Int reads an integer field of meta; 0 when absent.
func (c *ShardContents) Int(field string) int64 {
	v, _ := strconv.ParseInt(c.Meta[field], 10, 64)
	return v
}

// ReadShard is step 2: it reads shard k whole, in pages. Run it on a
// frozen shard: nothing moves then.
func (s *Store) ReadShard(ctx context.Context, k Keys) (*ShardContents, error) {
	c := &ShardContents{Claims: map[string]string{}, Applied: map[string]bool{}}
	var err error
	if c.Meta, err = s.c.Do(ctx, s.c.B().Hgetall().Key(k.Meta).Build()).AsStrMap(); err != nil {
		return nil, fmt.Errorf("read %s: meta: %w", k.Tag, err)
	}
	if c.Pool, err = s.readList(ctx, k.Pool); err != nil {
		return nil, fmt.Errorf("read %s: pool: %w", k.Tag, err)
	}
	if c.Lost, err = s.readList(ctx, k.Lost); err != nil {
		return nil, fmt.Errorf("read %s: lost: %w", k.Tag, err)
	}
	if err := s.readClaims(ctx, k, c.Claims); err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Tag, err)
	}
	if err := s.ScanGrants(ctx, k, func(g StreamGrant) error { c.Grants = append(c.Grants, g); return nil }); err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Tag, err)
	}
	if c.Transfers, err = s.Transfers(ctx, k); err != nil {
		return nil, err
	}
	applied, err := s.c.Do(ctx, s.c.B().Hkeys().Key(k.Applied).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("read %s: applied: %w", k.Tag, err)
	}
	for _, xid := range applied {
		c.Applied[xid] = true
	}
	n, err := s.c.Do(ctx, s.c.B().Exists().Key(k.Blocked).Build()).AsInt64()
	if err != nil {
		return nil, fmt.Errorf("read %s: blocked: %w", k.Tag, err)
	}
	c.Blocklist = n == 1
	return c, nil
}

// readList reads a list whole, in pages.
func (s *Store) readList(ctx context.Context, key string) ([]string, error) {
	var out []string
	for start := int64(0); ; start += scanPage {
		vals, err := s.c.Do(ctx, s.c.B().Lrange().Key(key).Start(start).Stop(start+scanPage-1).Build()).AsStrSlice()
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
		if len(vals) < scanPage {
			return out, nil
		}
	}
}

// readClaims reads the claims hash raw: a rebuild judges every value
// itself rather than fail on one it cannot parse.
func (s *Store) readClaims(ctx context.Context, k Keys, into map[string]string) error {
	cursor := uint64(0)
	for {
		e, err := s.c.Do(ctx, s.c.B().Hscan().Key(k.Claims).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("claims: %w", err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			into[e.Elements[i]] = e.Elements[i+1]
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}

// ShardImage is a shard as a rebuild writes it.
type ShardImage struct {
	Pool   []string   // packets, head to tail
	Claims []string   // user, packet pairs
	Grants [][]string // stream entries, each user, packet pairs (at most MaxBatch grants)
	Lost   []string   // packets found lost
}

// stagePipeline is how many writes go out in one round trip.
const stagePipeline = 32

// Stage is step 3: it writes img under the staged keys of token, afresh.
// Every round trip renews their expiry, so keys of a rebuild that died
// go away.
func (s *Store) Stage(ctx context.Context, k Keys, token string, img ShardImage) error {
	st := k.Staged(token)
	var cmds []rueidis.Completed
	flush := func(force bool) error {
		if len(cmds) < stagePipeline && !force {
			return nil
		}
		for _, key := range []string{st.Pool, st.Claims, st.Grants, st.Lost} {
			cmds = append(cmds, s.c.B().Pexpire().Key(key).Milliseconds(stagedTTL.Milliseconds()).Build())
		}
		for _, r := range s.c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("stage %s: %w", k.Tag, err)
			}
		}
		cmds = cmds[:0]
		return nil
	}
	cmds = append(cmds, s.c.B().Del().Key(st.Pool, st.Claims, st.Grants, st.Lost).Build())
	add := func(c rueidis.Completed) error { cmds = append(cmds, c); return flush(false) }
	for _, part := range chunks(img.Pool, LoadChunk) {
		if err := add(s.c.B().Rpush().Key(st.Pool).Element(part...).Build()); err != nil {
			return err
		}
	}
	for _, part := range chunks(img.Lost, LoadChunk) {
		if err := add(s.c.B().Rpush().Key(st.Lost).Element(part...).Build()); err != nil {
			return err
		}
	}
	for _, part := range chunks(img.Claims, 2*LoadChunk) {
		if err := add(s.c.B().Arbitrary("HSET").Keys(st.Claims).Args(part...).Build()); err != nil {
			return err
		}
	}
	for _, e := range img.Grants {
		if err := add(s.c.B().Arbitrary("XADD").Keys(st.Grants).Args("*").Args(e...).Build()); err != nil {
			return err
		}
	}
	return flush(true)
}

// chunks cuts v into parts of at most n elements.
func chunks(v []string, n int) [][]string {
	var out [][]string
	for len(v) > n {
		out = append(out, v[:n])
		v = v[n:]
	}
	if len(v) > 0 {
		out = append(out, v)
	}
	return out
}

// RebuiltMeta is the whole new meta of a rebuilt shard, as Swap stores
// it; the script sets the state (loading), the token and LedgerFence.
type RebuiltMeta struct {
	// Kept are the fields of the old meta the rebuild does not decide, as
	// they were.
	Kept                       map[string]string
	GrantedCount, GrantedCents int64  // packets granted on the shard
	LostCount, LostCents       int64  // packets found lost
	OpensAt, ClosesAt          int64  // ms
	CreatedAt                  string // ms, as the root's meta held it
	RebuiltAt                  int64  // ms, Redis clock
	RebuildFrom                string // the state before the first rebuild froze it
	CloseReason                string // "" unless the shard is restored closed
	ClosedAt                   int64  // ms, when closed
	Meta                              // the shard's share, the terms on the root, the frontier
}

// argv is rebuild_swap.lua's ARGV: the rebuild's token, the ledger fence,
// then the meta fields.
func (m *RebuiltMeta) argv(token string, fence int64) []string {
	a := append(make([]string, 0, 2+2*(len(m.Kept)+26)), token, i64(fence))
	for name, v := range m.Kept {
		a = append(a, name, v)
	}
	a = append(a, "granted_count", i64(m.GrantedCount), "granted_cents", i64(m.GrantedCents), "refunded_cents", "0",
		"lost_count", i64(m.LostCount), "lost_cents", i64(m.LostCents),
		"opens_at", i64(m.OpensAt), "closes_at", i64(m.ClosesAt), "created_at", m.CreatedAt,
		"rebuilt_at", i64(m.RebuiltAt), "rebuild_from", m.RebuildFrom)
	if m.CloseReason != "" {
		a = append(a, "close_reason", m.CloseReason, "closed_at", i64(m.ClosedAt))
	}
	return appendTerms(m.Terms, m.Share.appendTo(m.Frontier.appendTo(a)))
}

// Swap is step 4a: the staged keys of token replace shard k's, and meta
// becomes m with LedgerFence set to fence (the ledger's fence, which the
// rebuild raised before it read the ledger: settlement passes it with
// every write, and a batch read before the rebuild carries an older one),
// the shard still loading. swapped is false when token swapped it before.
func (s *Store) Swap(ctx context.Context, k Keys, token string, fence int64, m RebuiltMeta) (swapped bool, err error) {
	st := k.Staged(token)
	keys := []string{k.Meta, k.Pool, k.Claims, k.Grants, k.Xfers, k.Applied, k.Lost, st.Pool, st.Claims, st.Grants, st.Lost}
	n, err := s.s.rebuildSwap.Exec(ctx, s.c, keys, m.argv(token, fence)).AsInt64()
	if err != nil {
		return false, resultError("swap "+k.Tag, err)
	}
	return n == 1, nil
}

// ActivateRebuilt is step 4b: shard k goes live in state (scheduled,
// open or closed; a closed one with its reason and close time, ms),
// paused when paused is set (in the same call, so no grab runs on it
// between); otherwise with the paused field the swap left in meta.
func (s *Store) ActivateRebuilt(ctx context.Context, k Keys, token, state string, paused bool, reason string, closedAt int64) error {
	args := []string{token, state, "0"}
	if paused {
		args[2] = "1"
	}
	if state == "closed" {
		args = append(args, reason, strconv.FormatInt(closedAt, 10))
	}
	if err := s.s.rebuildActivate.Exec(ctx, s.c, []string{k.Meta, k.Blocked}, args).Error(); err != nil {
		return resultError("activate "+k.Tag, err)
	}
	return nil
}
