package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The scans below read a campaign's contents in pages, for audits and
// reconciliation. They are not atomic: run them on a closed campaign (or
// accept that grabs move things between pages).

const scanPage = 10000

// ParseClaim splits a claim value "<seq>:<cents>".
func ParseClaim(v string) (seq, cents int64, err error) {
	a, b, ok := strings.Cut(v, ":")
	if ok {
		seq, err = strconv.ParseInt(a, 10, 64)
		if err == nil {
			cents, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil || seq < 1 || cents < 1 {
		return 0, 0, fmt.Errorf("%w: malformed claim %q", ErrCorrupt, v)
	}
	return seq, cents, nil
}

// ScanPool calls fn for every packet still in the pool, in list order
// (which is seq order).
func (s *Store) ScanPool(ctx context.Context, k Keys, fn func(seq, cents int64) error) error {
	return s.scanPackets(ctx, "pool", k.Pool, fn)
}

// ScanLost calls fn for every packet a rebuild found lost (see package
// rebuild), in seq order.
func (s *Store) ScanLost(ctx context.Context, k Keys, fn func(seq, cents int64) error) error {
	return s.scanPackets(ctx, "lost packets", k.Lost, fn)
}

// scanPackets calls fn for every packet of the list key, in list order.
func (s *Store) scanPackets(ctx context.Context, what, key string, fn func(seq, cents int64) error) error {
	for start := int64(0); ; start += scanPage {
		vals, err := s.c.Do(ctx, s.c.B().Lrange().Key(key).Start(start).Stop(start+scanPage-1).Build()).AsStrSlice()
		if err != nil {
			return fmt.Errorf("scan %s: %w", what, err)
		}
		for _, v := range vals {
			seq, cents, err := ParseClaim(v)
			if err != nil {
				return fmt.Errorf("scan %s: %w", what, err)
			}
			if err := fn(seq, cents); err != nil {
				return err
			}
		}
		if len(vals) < scanPage {
			return nil
		}
	}
}

// StreamGrant is one grant read back from the grants stream.
type StreamGrant struct {
	EntryID string
	User    string
	Seq     int64
	Cents   int64
	// At is the grant's time, milliseconds since the epoch by Redis'
	// clock: the entry id's, or the one a redriven or rebuilt grant
	// carries in its packet (ParseStreamPacket).
	At int64
}

// ScanGrants calls fn for every grant in the grants stream, in stream
// order. The raw reply is parsed (not a map) so a duplicated field would be
// seen, not hidden.
func (s *Store) ScanGrants(ctx context.Context, k Keys, fn func(StreamGrant) error) error {
	start := "-"
	for {
		entries, err := s.c.Do(ctx, s.c.B().Xrange().Key(k.Grants).Start(start).End("+").Count(1000).Build()).ToArray()
		if err != nil {
			return fmt.Errorf("scan grants: %w", err)
		}
		last := ""
		for _, e := range entries {
			parts, err := e.ToArray()
			if err != nil || len(parts) != 2 {
				return fmt.Errorf("scan grants: %w: malformed entry", ErrCorrupt)
			}
			last, _ = parts[0].ToString()
			fv, err := parts[1].AsStrSlice()
			if err != nil || len(fv)%2 != 0 {
				return fmt.Errorf("scan grants: %w: malformed entry %s", ErrCorrupt, last)
			}
			entryMS, err := EntryTime(last)
			if err != nil {
				return fmt.Errorf("scan grants: %w", err)
			}
			for i := 0; i < len(fv); i += 2 {
				seq, cents, at, err := ParseStreamPacket(fv[i+1], entryMS)
				if err != nil {
					return fmt.Errorf("scan grants: entry %s: %w", last, err)
				}
				if err := fn(StreamGrant{EntryID: last, User: fv[i], Seq: seq, Cents: cents, At: at}); err != nil {
					return err
				}
			}
		}
		if len(entries) < 1000 {
			return nil
		}
		start = "(" + last
	}
}

// ScanClaims calls fn for every claim (user -> packet).
func (s *Store) ScanClaims(ctx context.Context, k Keys, fn func(user string, seq, cents int64) error) error {
	cursor := uint64(0)
	for {
		e, err := s.c.Do(ctx, s.c.B().Hscan().Key(k.Claims).Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("scan claims: %w", err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			seq, cents, err := ParseClaim(e.Elements[i+1])
			if err != nil {
				return fmt.Errorf("scan claims: user %q: %w", e.Elements[i], err)
			}
			if err := fn(e.Elements[i], seq, cents); err != nil {
				return err
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}
