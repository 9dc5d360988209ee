package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Outcome codes of grab.lua, as lua/lib/outcomes.lua defines them (one
// code space with the discount scripts'; the root package's
// TestOutcomeCodes holds them to that file).
const (
	Granted    = 1
	Already    = 2
	SoldOut    = 3
	NotOpen    = 4
	Closed     = 5
	NoCampaign = 6
	Dry        = 7  // a shard of a sharded campaign is empty while open
	Paused     = 14 // the campaign is paused (pause.lua) while its window is open
	Blocked    = 15 // the user is blocked on this campaign (block.lua)
	Sealed     = 16 // the opened part of the pool is empty, a sealed part remains (blocks.go)
)

// MaxBatch is the most users one grab.lua call takes. The script accepts
// 3000; unpack of the claims HSET needs 2 arguments per user and Lua stops
// near 8000.
const MaxBatch = 3000

// GrabResult is one user's answer from grab.lua.
type GrabResult struct {
	Outcome int
	Seq     int64
	Cents   int64
	// At is when a Granted packet was granted, in ms since the epoch by
	// Redis' clock: the time of the batch's grants stream entry, which
	// settlement records in the ledger (EntryTime). 0 for other outcomes.
	At int64
}

// GrabKeys are the KEYS of grab.lua for one shard, built once per
// campaign by callers on the hot path.
func GrabKeys(k Keys) []string {
	return []string{k.Meta, k.Pool, k.Claims, k.Grants, k.Blocked}
}

// Grab runs grab.lua on one shard: keys are its GrabKeys, shards the
// campaign's shard count as the caller routed with it, users a batch
// (1..MaxBatch). It writes one result per user into out, which must have
// len(users) elements. A caller that routed with a stale shard count gets
// a *ShardsError and nothing was written.
func (s *Store) Grab(ctx context.Context, keys []string, shards int, users []string, out []GrabResult) error {
	_, err := s.GrabHinted(ctx, keys, shards, users, out)
	return err
}

// GrabHinted is Grab, and says whether grab.lua hinted that the opened
// part of the pool runs low while a sealed part remains (blocks.go): the
// caller may open the next block ahead of need.
func (s *Store) GrabHinted(ctx context.Context, keys []string, shards int, users []string, out []GrabResult) (low bool, err error) {
	// ARGV: the shard count, then the users.
	argv := getArgv(1 + len(users))
	*argv = append(append(*argv, shardsArg(shards)), users...)
	r, werr := s.execSync(ctx, WaitGrab, s.s.grab, keys, *argv, s.syncOf(keys[0], grabSilent))
	putArgv(argv)
	resp, err := r.ToArray()
	if err == nil {
		err = werr
	}
	if err != nil {
		return false, shardsError(resultError("grab", err))
	}
	if len(resp) < len(users) || len(resp) > len(users)+2 {
		return false, fmt.Errorf("grab: reply of %d values for %d users", len(resp), len(users))
	}
	// After the users: the grants entry's id when the batch granted, then
	// LOW when the opened part of the pool runs low.
	var at int64
	for i := range resp[len(users):] {
		m := &resp[len(users)+i]
		switch {
		case m.IsString() && at == 0 && !low:
			id, _ := m.ToString()
			if at, err = EntryTime(id); err != nil {
				return false, fmt.Errorf("grab: %w", err)
			}
		case m.IsInt64() && !low:
			if code, _ := m.AsInt64(); code != 0 {
				return false, fmt.Errorf("%w: grab: code %d after the users' answers", ErrCorrupt, code)
			}
			low = true
		default:
			return false, fmt.Errorf("%w: grab: unexpected element after the users' answers", ErrCorrupt)
		}
	}
	for i := range resp[:len(users)] {
		r, err := decodeGrab(&resp[i])
		if err != nil {
			return false, fmt.Errorf("grab: user %d: %w", i, err)
		}
		if r.Outcome == Granted {
			if at == 0 {
				return false, fmt.Errorf("%w: grab: a grant without its grants entry id", ErrCorrupt)
			}
			r.At = at
		}
		out[i] = r
	}
	return low, nil
}

// EntryTime is the time of a stream entry id "<ms>-<n>", in ms since the
// epoch: the clock of the Redis that added it (XADD with "*" takes the
// server's time, or the last entry's when the clock stepped back, so the
// ids of a stream never decrease).
func EntryTime(id string) (int64, error) {
	ms, _, ok := strings.Cut(id, "-")
	v, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || v <= 0 {
		return 0, fmt.Errorf("%w: stream entry id %q", ErrCorrupt, id)
	}
	return v, nil
}

// decodeGrab reads one user's element of grab.lua's reply: a packet string
// (GRANTED), a one-element array holding one (ALREADY) or an outcome code.
func decodeGrab(m *rueidis.RedisMessage) (GrabResult, error) {
	if code, err := m.AsInt64(); err == nil {
		return GrabResult{Outcome: int(code)}, nil
	}
	outcome := Granted
	if arr, err := m.ToArray(); err == nil {
		if len(arr) != 1 {
			return GrabResult{}, fmt.Errorf("%w: ALREADY reply of %d elements", ErrCorrupt, len(arr))
		}
		m, outcome = &arr[0], Already
	}
	v, err := m.ToString()
	if err != nil {
		return GrabResult{}, fmt.Errorf("%w: unexpected reply element", ErrCorrupt)
	}
	seq, cents, err := ParseClaim(v)
	if err != nil {
		return GrabResult{}, err
	}
	return GrabResult{Outcome: outcome, Seq: seq, Cents: cents}, nil
}

// shardsArgs are the shard counts 0..MaxShards as the batch scripts'
// first argument (grab.lua, disc_reserve.lua, disc_confirm.lua,
// disc_cancel.lua), so that a batch encodes its count without allocating.
var shardsArgs = func() (a [MaxShards + 1]string) {
	for i := range a {
		a[i] = strconv.Itoa(i)
	}
	return a
}()

// shardsArg is a batch script's first argument for a campaign of shards
// shards, as the caller routed with it (the script checks it against the
// campaign's own).
func shardsArg(shards int) string {
	if shards >= 0 && shards <= MaxShards {
		return shardsArgs[shards]
	}
	return strconv.Itoa(shards)
}

// ShardsError says that a campaign has another shard count than the
// caller routed with: nothing was written, and the caller routes again.
type ShardsError struct{ Shards int }

func (e *ShardsError) Error() string {
	return "campaign has " + strconv.Itoa(e.Shards) + " shards"
}

// shardsError turns a batch script's HBSHARDS reply into a *ShardsError.
func shardsError(err error) error {
	var se *ScriptError
	if errors.As(err, &se) && se.Code == "HBSHARDS" {
		if n, perr := strconv.Atoi(se.Message); perr == nil && n >= 1 && n <= MaxShards {
			return &ShardsError{Shards: n}
		}
	}
	return err
}
