package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Entry is one entry of a campaign's grants stream: the grants of one grab
// batch.
type Entry struct {
	ID     string
	Grants []StreamGrant
	// Raw holds the fields as stored, for the dead stream.
	Raw []DeadGrant
	// Deleted is true when the entry was trimmed or deleted while pending
	// (Redis returns its id with no fields): an alarm, never normal.
	Deleted bool
	// Err says why the entry cannot be read as grants (malformed).
	Err error
}

func toEntries(slices []rueidis.XRangeSlice) []Entry {
	out := make([]Entry, 0, len(slices))
	// One map for the read, cleared per entry, and each entry's slices at
	// their final size: an entry holds hundreds of grants, and the
	// allocations per grant were most of settlement's CPU.
	var seen map[string]bool
	for _, s := range slices {
		e := Entry{ID: s.ID}
		if s.FieldValues == nil {
			e.Deleted = true
			out = append(out, e)
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(s.FieldValues))
		}
		clear(seen)
		entryMS, idErr := EntryTime(s.ID)
		if idErr != nil {
			e.Err = idErr
		}
		e.Raw = make([]DeadGrant, 0, len(s.FieldValues))
		e.Grants = make([]StreamGrant, 0, len(s.FieldValues))
		for _, fv := range s.FieldValues {
			e.Raw = append(e.Raw, DeadGrant{User: fv.Field, Packet: fv.Value})
			if e.Err != nil {
				continue
			}
			seq, cents, at, err := ParseStreamPacket(fv.Value, entryMS)
			switch {
			case err != nil:
				e.Err = fmt.Errorf("field %q: %w", fv.Field, err)
			case fv.Field == "" || seen[fv.Field]:
				e.Err = fmt.Errorf("%w: user %q empty or repeated", ErrCorrupt, fv.Field)
			default:
				seen[fv.Field] = true
				e.Grants = append(e.Grants, StreamGrant{EntryID: s.ID, User: fv.Field, Seq: seq, Cents: cents, At: at})
			}
		}
		if len(s.FieldValues) == 0 && e.Err == nil {
			e.Err = fmt.Errorf("%w: entry without grants", ErrCorrupt)
		}
		if e.Err != nil {
			e.Grants = nil
		}
		out = append(out, e)
	}
	return out
}

// ReadGroup reads up to count entries of campaign id's grants stream for
// consumer in the settle group: its own pending entries when pending is
// true (after a restart, from id 0), else new ones (">"). It does not block.
func (s *Store) ReadGroup(ctx context.Context, k Keys, consumer string, count int64, pending bool) ([]Entry, error) {
	from := ">"
	if pending {
		from = "0"
	}
	res, err := s.c.Do(ctx, s.c.B().Xreadgroup().Group(SettleGroup, consumer).Count(count).
		Streams().Key(k.Grants).Id(from).Build()).AsXReadSlices()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grants of %s: %w", k.Tag, err)
	}
	return toEntries(res[k.Grants]), nil
}

// AutoClaim takes over entries that have been pending at other consumers
// for at least minIdle, starting at start ("0-0" first). It returns the
// cursor for the next call ("0-0" when the scan is complete) and the ids
// Redis reports as deleted: entries pending but no longer in the stream,
// which must never happen and are an alarm.
func (s *Store) AutoClaim(ctx context.Context, k Keys, consumer string, minIdle time.Duration, start string, count int64) (next string, entries []Entry, deleted []string, err error) {
	vals, err := s.c.Do(ctx, s.c.B().Xautoclaim().Key(k.Grants).Group(SettleGroup).Consumer(consumer).
		MinIdleTime(strconv.FormatInt(minIdle.Milliseconds(), 10)).Start(start).Count(count).Build()).ToArray()
	if err != nil {
		return "", nil, nil, fmt.Errorf("autoclaim grants of %s: %w", k.Tag, err)
	}
	if len(vals) < 2 {
		return "", nil, nil, fmt.Errorf("autoclaim grants of %s: reply of %d elements", k.Tag, len(vals))
	}
	next, _ = vals[0].ToString()
	slices, err := vals[1].AsXRangeSlices()
	if err != nil {
		return "", nil, nil, fmt.Errorf("autoclaim grants of %s: %w", k.Tag, err)
	}
	if len(vals) > 2 {
		deleted, _ = vals[2].AsStrSlice()
	}
	return next, toEntries(slices), deleted, nil
}

// Ack acknowledges settled entries.
func (s *Store) Ack(ctx context.Context, k Keys, entryIDs ...string) error {
	if len(entryIDs) == 0 {
		return nil
	}
	return s.c.Do(ctx, s.c.B().Xack().Key(k.Grants).Group(SettleGroup).Id(entryIDs...).Build()).Error()
}

// DeadGrant is a grant that cannot settle, as the dead stream records it:
// a grants stream entry's field and value, raw (a malformed entry's may
// not parse; a discount's user is its OrderKey).
type DeadGrant struct{ User, Packet string }

// Dead records grants that cannot settle (for a malformed entry, its raw
// fields) in the dead stream and acknowledges their entry, in one script.
func (s *Store) Dead(ctx context.Context, k Keys, entryID, reason string, grants []DeadGrant) error {
	return resultError("dead-letter", s.s.dead.Exec(ctx, s.c, []string{k.Grants, k.Dead}, deadArgv(entryID, reason, grants)).Error())
}

// deadArgv is dead.lua's ARGV: the entry id, the reason, then user, packet
// pairs.
func deadArgv(entryID, reason string, grants []DeadGrant) []string {
	a := make([]string, 0, 2+2*len(grants))
	a = append(a, entryID, reason)
	for _, g := range grants {
		a = append(a, g.User, g.Packet)
	}
	return a
}

// DeadNote records in shard k's dead stream an incident that is no entry
// of its stream (a refund the ledger refused), with the fields entry
// "none" and reason. Like a dead grant it holds the campaign's refund back
// until an operator redrives, which deletes it (it has no grant to put
// back). One XADD: nothing to check before it.
func (s *Store) DeadNote(ctx context.Context, k Keys, reason string) error {
	return s.c.Do(ctx, s.c.B().Xadd().Key(k.Dead).Id("*").FieldValue().
		FieldValue("entry", "none").FieldValue("reason", reason).Build()).Error()
}

// GroupState is where settlement stands on a campaign's grants stream.
type GroupState struct {
	// Length is the number of entries in the stream.
	Length int64
	// LastDelivered is the id of the last entry handed to a consumer.
	LastDelivered string
	// Lag counts entries not yet delivered to any consumer.
	Lag int64
	// Pending counts delivered entries not yet acknowledged; MinPending is
	// the oldest of them ("" when none).
	Pending    int64
	MinPending string
	// Dead counts entries in the dead stream.
	Dead int64
}

// Group reads the settle group's state.
func (s *Store) Group(ctx context.Context, k Keys) (GroupState, error) {
	return groupState(k.Tag, s.c.DoMulti(ctx, s.groupCmds(k)...))
}

// groupCmds are the reads groupState decodes, in its order.
func (s *Store) groupCmds(k Keys) []rueidis.Completed {
	return []rueidis.Completed{
		s.c.B().XinfoGroups().Key(k.Grants).Build(),
		s.c.B().Xpending().Key(k.Grants).Group(SettleGroup).Build(),
		s.c.B().Xlen().Key(k.Grants).Build(),
		s.c.B().Xlen().Key(k.Dead).Build(),
		s.c.B().Xrevrange().Key(k.Grants).End("+").Start("-").Count(1).Build(),
	}
}

// groupState decodes the replies of groupCmds.
func groupState(tag string, res []rueidis.RedisResult) (GroupState, error) {
	var g GroupState
	groups, err := res[0].ToArray()
	if err != nil {
		return g, fmt.Errorf("group of %s: %w", tag, err)
	}
	found := false
	for _, gm := range groups {
		m, err := gm.AsMap()
		if err != nil {
			return g, fmt.Errorf("group of %s: %w", tag, err)
		}
		name, ld, lag := m["name"], m["last-delivered-id"], m["lag"]
		if n, _ := name.ToString(); n != SettleGroup {
			continue
		}
		found = true
		g.LastDelivered, _ = ld.ToString()
		if _, ok := m["lag"]; ok && !lag.IsNil() {
			g.Lag, _ = lag.AsInt64()
		} else {
			g.Lag = -1 // Redis cannot tell (after some deletions); resolved below
		}
	}
	if !found {
		return g, fmt.Errorf("group of %s: %w: no settle group", tag, ErrCorrupt)
	}
	pend, err := res[1].ToArray()
	if err != nil || len(pend) < 2 {
		return g, fmt.Errorf("pending of %s: %v", tag, err)
	}
	g.Pending, _ = pend[0].AsInt64()
	if g.Pending > 0 {
		g.MinPending, _ = pend[1].ToString()
	}
	g.Length, _ = res[2].AsInt64()
	g.Dead, _ = res[3].AsInt64()
	// Whether anything is undelivered is decided by ids: an entry after the
	// last delivered one. The group's lag is only the count, and Redis
	// cannot always give it (after deletions, or on the emulator).
	undelivered := false
	if last, err := res[4].AsXRange(); err == nil && len(last) == 1 {
		undelivered = g.LastDelivered == "" || lessID(g.LastDelivered, last[0].ID)
	}
	switch {
	case !undelivered:
		g.Lag = 0
	case g.Lag <= 0:
		g.Lag = 1 // at least one; the exact number is unknown
	}
	return g, nil
}

// TrimSettled drops the stream entries that are settled: those below both
// the oldest pending entry and the last delivered one (never by length,
// which could drop an entry not yet delivered).
func (s *Store) TrimSettled(ctx context.Context, k Keys, g GroupState) error {
	minID := g.LastDelivered
	if minID == "" || minID == "0-0" {
		return nil
	}
	if g.MinPending != "" && lessID(g.MinPending, minID) {
		minID = g.MinPending
	}
	return s.c.Do(ctx, s.c.B().Xtrim().Key(k.Grants).Minid().Threshold(minID).Build()).Error()
}

// lessID compares two stream ids "ms-seq".
func lessID(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	if am != bm {
		return am < bm
	}
	return as < bs
}

func splitID(id string) (uint64, uint64) {
	var ms, seq uint64
	i := 0
	for ; i < len(id) && id[i] != '-'; i++ {
		ms = ms*10 + uint64(id[i]-'0')
	}
	for i++; i < len(id); i++ {
		seq = seq*10 + uint64(id[i]-'0')
	}
	return ms, seq
}

// Settle records the refund of a closed campaign (or of one shard: what
// its pool holds) in Redis and marks it settled; changed is false when it
// was settled already.
func (s *Store) Settle(ctx context.Context, k Keys, refund int64) (changed bool, err error) {
	vals, err := s.s.settle.Exec(ctx, s.c, []string{k.Meta, k.Pool, k.Xfers}, []string{strconv.FormatInt(refund, 10)}).ToArray()
	if err != nil {
		return false, resultError("settle", err)
	}
	if len(vals) != 3 {
		return false, fmt.Errorf("settle: reply of %d elements", len(vals))
	}
	c, _ := vals[2].AsInt64()
	return c == 1, nil
}

// IsUnknown reports whether err leaves a write's outcome unknown.
func IsUnknown(err error) bool {
	var u *UnknownError
	return errors.As(err, &u)
}

// Redrive moves the dead grants of campaign id back into its grants stream,
// in calls of up to 500 entries, and returns how many entries moved.
func (s *Store) Redrive(ctx context.Context, k Keys) (int64, error) {
	var total int64
	for {
		n, err := s.s.redrive.Exec(ctx, s.c, []string{k.Dead, k.Grants}, []string{"500"}).AsInt64()
		if err != nil {
			return total, resultError("redrive", err)
		}
		total += n
		if n < 500 {
			return total, nil
		}
	}
}
