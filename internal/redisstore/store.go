package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/internal/luascript"
)

// Outcome codes of grab.lua.
const (
	Granted    = 1
	Already    = 2
	SoldOut    = 3
	NotOpen    = 4
	Closed     = 5
	NoCampaign = 6
	Dry        = 7  // a shard of a sharded campaign is empty while open
	Sealed     = 8  // the opened part of the pool is empty, a sealed part remains (blocks.go)
	Paused     = 9  // the campaign is paused (pause.lua) while its window is open
	Blocked    = 10 // the user is blocked on this campaign (block.lua)
)

// MaxBatch is the most users one grab.lua call takes. The script accepts
// 3000; unpack of the claims HSET needs 2 arguments per user and Lua stops
// near 8000.
const MaxBatch = 3000

// LoadChunk is how many packets one load.lua call appends.
const LoadChunk = 2000

// loadPipeline is how many load.lua calls go out in one round trip.
const loadPipeline = 32

// Store runs the campaign scripts on one Redis.
type Store struct {
	c rueidis.Client
	s *scripts
	// waitN > 0: every script that moves packets (grab, the transfer
	// steps) is followed by WAIT waitN waitMs on its connection.
	waitN, waitMs int64
	tracer        trace.Tracer // nil: no spans
}

// New returns a Store on client c, a Redis 7 or later.
func New(c rueidis.Client) *Store { return &Store{c: c, s: modernScripts} }

// NewLegacy returns a Store whose scripts carry no "#!lua" flags line, for
// servers that cannot parse it (Redis before 7, the in-process emulator).
// Such a server may fail a script at its first write when out of memory,
// instead of refusing it up front.
func NewLegacy(c rueidis.Client) *Store { return &Store{c: c, s: legacyScripts} }

// WithWait returns a copy of the store whose grabs, discount calls
// (reserve, confirm, cancel), Held reads and transfer steps are answered
// only once replicas replicas hold what they answer, waiting at most
// timeout; one that falls short is an *UnknownError (wrapping a
// *luascript.ShortWaitError): its outcome is unknown. An answer a script
// gave from earlier writes without writing is made to wait for them too
// (see sync.go).
func (s *Store) WithWait(replicas int, timeout time.Duration) *Store {
	c := *s
	c.waitN, c.waitMs = int64(replicas), max(timeout.Milliseconds(), 1)
	return &c
}

// WithTracer returns a copy of the store that records a span of each
// batch script call sent with WAIT (redis.wait).
func (s *Store) WithTracer(t trace.Tracer) *Store {
	c := *s
	c.tracer = t
	return &c
}

// Wait is the store's WAIT setting: replicas and timeout (0 when off).
func (s *Store) Wait() (replicas int, timeout time.Duration) {
	return int(s.waitN), time.Duration(s.waitMs) * time.Millisecond
}

// exec runs a script that moves packets, followed by WAIT when the store
// waits for replicas.
func (s *Store) exec(ctx context.Context, sc *luascript.Script, keys, args []string) (rueidis.RedisResult, error) {
	return s.execSync(ctx, sc, keys, args, nil)
}

// execSync is exec for a batch script that may answer from earlier writes
// without writing: sync (from syncOf) then follows its WAIT (see sync.go).
func (s *Store) execSync(ctx context.Context, sc *luascript.Script, keys, args []string, sync *luascript.Sync) (rueidis.RedisResult, error) {
	if s.waitN == 0 {
		return sc.Exec(ctx, s.c, keys, args), nil
	}
	if s.tracer == nil {
		return sc.ExecWaitSync(ctx, s.c, keys, args, s.waitN, s.waitMs, sync)
	}
	// The script and its WAIT go out together on one connection: the span
	// covers both, the round trip a WAIT adds to a batch.
	ctx, span := s.tracer.Start(ctx, "redis.wait", trace.WithAttributes(
		attribute.Int64("hongbao.wait.replicas", s.waitN), attribute.Int64("hongbao.wait.timeout_ms", s.waitMs)))
	res, werr := sc.ExecWaitSync(ctx, s.c, keys, args, s.waitN, s.waitMs, sync)
	if err := errors.Join(res.Error(), werr); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return res, werr
}

// Client is the Redis client of the store.
func (s *Store) Client() rueidis.Client { return s.c }

// Begin starts loading a campaign (or one shard of it) with the given meta
// fields. If it already exists past loading, it returns its state and
// nothing is changed, unless restartUnused is set and the shard never
// granted, lent or borrowed a packet: then it is loaded afresh.
func (s *Store) Begin(ctx context.Context, k Keys, token string, restartUnused bool, fields []string) (existing string, err error) {
	flag := "0"
	if restartUnused {
		flag = "1"
	}
	args := append([]string{token, flag}, fields...)
	keys := []string{k.Meta, k.Staging, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied}
	vals, err := s.s.begin.Exec(ctx, s.c, keys, args).ToArray()
	if err != nil {
		return "", resultError("begin load", err)
	}
	if len(vals) != 2 {
		return "", fmt.Errorf("begin load: reply of %d elements", len(vals))
	}
	code, _ := vals[0].AsInt64()
	if code == 1 {
		st, _ := vals[1].ToString()
		return st, nil
	}
	return "", nil
}

// FormatPacket writes a packet as the scripts carry it: "<seq>:<cents>".
func FormatPacket(seq, cents int64) string {
	var b [41]byte
	out := strconv.AppendInt(b[:0], seq, 10)
	out = append(out, ':')
	return string(strconv.AppendInt(out, cents, 10))
}

// Load appends amounts to the staging list of a loading campaign or shard,
// in pipelined chunks: amounts[i] is the packet of seq first + i*stride
// (1 and 1 for a one-shard campaign; shard+1 and the shard count for a
// shard, as load.lua checks). progress, if not nil, is told how many
// packets are staged after each round trip.
func (s *Store) Load(ctx context.Context, k Keys, token string, first, stride int64, amounts []int64, progress func(done int)) error {
	keys := []string{k.Meta, k.Staging}
	var execs []rueidis.LuaExec
	flush := func() error {
		if len(execs) == 0 {
			return nil
		}
		for _, r := range s.s.load.ExecMulti(ctx, s.c, execs...) {
			if err := r.Error(); err != nil {
				return resultError("load pool", err)
			}
		}
		execs = execs[:0]
		return nil
	}
	for off := 0; off < len(amounts); off += LoadChunk {
		end := min(off+LoadChunk, len(amounts))
		args := make([]string, 0, 2+end-off)
		args = append(args, token, strconv.Itoa(off))
		for i, a := range amounts[off:end] {
			args = append(args, FormatPacket(first+int64(off+i)*stride, a))
		}
		execs = append(execs, rueidis.LuaExec{Keys: keys, Args: args})
		if len(execs) == loadPipeline || end == len(amounts) {
			if err := flush(); err != nil {
				return err
			}
			if progress != nil {
				progress(end)
			}
		}
	}
	return nil
}

// Activation is what activate.lua resolved.
type Activation struct {
	State    string
	OpensAt  int64 // ms
	ClosesAt int64 // ms
}

// Activate makes a fully staged campaign live. opensAt 0 means now by the
// Redis clock; closesAt 0 means opensAt + windowMs.
func (s *Store) Activate(ctx context.Context, k Keys, token string, opensAt, closesAt, windowMs int64) (Activation, error) {
	vals, err := s.s.activate.Exec(ctx, s.c, []string{k.Meta, k.Staging, k.Pool, k.Grants, k.Blocked},
		[]string{token, strconv.FormatInt(opensAt, 10), strconv.FormatInt(closesAt, 10), strconv.FormatInt(windowMs, 10)}).ToArray()
	if err != nil {
		return Activation{}, resultError("activate", err)
	}
	if len(vals) != 3 {
		return Activation{}, fmt.Errorf("activate: reply of %d elements", len(vals))
	}
	var a Activation
	a.State, _ = vals[0].ToString()
	a.OpensAt, _ = vals[1].AsInt64()
	a.ClosesAt, _ = vals[2].AsInt64()
	return a, nil
}

// GrabResult is one user's answer from grab.lua.
type GrabResult struct {
	Outcome int
	Seq     int64
	Cents   int64
}

// Grab runs grab.lua on one shard: args[0] is the campaign's shard count
// as the caller knows it (ShardsArg), args[1:] a batch of users
// (1..MaxBatch). It writes one result per user into out, which must have
// len(args)-1 elements. A caller that routed with a stale shard count gets
// a *ShardsError and nothing was written.
func (s *Store) Grab(ctx context.Context, keys []string, args []string, out []GrabResult) error {
	_, err := s.GrabHinted(ctx, keys, args, out)
	return err
}

// GrabHinted is Grab, and says whether grab.lua hinted that the opened
// part of the pool runs low while a sealed part remains (blocks.go): the
// caller may open the next block ahead of need.
func (s *Store) GrabHinted(ctx context.Context, keys []string, args []string, out []GrabResult) (low bool, err error) {
	r, werr := s.execSync(ctx, s.s.grab, keys, args, s.syncOf(keys[0], grabSilent))
	resp, err := r.ToArray()
	if err == nil {
		err = werr
	}
	if err != nil {
		return false, shardsError(resultError("grab", err))
	}
	users := args[1:]
	if len(resp) == len(users)+1 {
		low, resp = true, resp[:len(users)]
	}
	if len(resp) != len(users) {
		return false, fmt.Errorf("grab: reply of %d values for %d users", len(resp), len(users))
	}
	for i := range resp {
		r, err := decodeGrab(&resp[i])
		if err != nil {
			return false, fmt.Errorf("grab: user %d: %w", i, err)
		}
		out[i] = r
	}
	return low, nil
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

// GrabKeys are the KEYS of grab.lua for one shard, built once per
// campaign by callers on the hot path.
func GrabKeys(k Keys) []string {
	return []string{k.Meta, k.Pool, k.Claims, k.Grants, k.Blocked}
}

// ShardsArg is grab.lua's first argument for a campaign of shards shards.
func ShardsArg(shards int) string { return strconv.Itoa(shards) }

// ShardsError says that a campaign has another shard count than the
// caller routed with: nothing was written, and the caller routes again.
type ShardsError struct{ Shards int }

func (e *ShardsError) Error() string {
	return "campaign has " + strconv.Itoa(e.Shards) + " shards"
}

// shardsError turns grab.lua's HBSHARDS reply into a *ShardsError.
func shardsError(err error) error {
	var se *ScriptError
	if errors.As(err, &se) && se.Code == "HBSHARDS" {
		if n, perr := strconv.Atoi(se.Message); perr == nil && n >= 1 && n <= MaxShards {
			return &ShardsError{Shards: n}
		}
	}
	return err
}

// Snapshot is a consistent read of one shard's meta and pool length.
type Snapshot struct {
	Now       int64             // Redis clock, ms
	PoolLen   int64             // packets in the pool
	Transfers int64             // transfer records in flight out of this shard
	Meta      map[string]string // all fields of meta
}

// Status reads a snapshot; ErrNoCampaign when the campaign (or shard)
// does not exist.
func (s *Store) Status(ctx context.Context, k Keys) (Snapshot, error) {
	return snapshot(s.s.status.Exec(ctx, s.c, statusKeys(k), nil))
}

// StatusAll reads a snapshot of every shard in one round trip (each
// shard's read is consistent, the set is not: a grab may run between two).
func (s *Store) StatusAll(ctx context.Context, shards []Keys) ([]Snapshot, error) {
	execs := make([]rueidis.LuaExec, len(shards))
	for i, k := range shards {
		execs[i] = rueidis.LuaExec{Keys: statusKeys(k)}
	}
	out := make([]Snapshot, len(shards))
	for i, r := range s.s.status.ExecMulti(ctx, s.c, execs...) {
		snap, err := snapshot(r)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", shards[i].Tag, err)
		}
		out[i] = snap
	}
	return out, nil
}

func statusKeys(k Keys) []string { return []string{k.Meta, k.Pool, k.Xfers} }

func snapshot(r rueidis.RedisResult) (Snapshot, error) {
	vals, err := r.ToArray()
	if err != nil {
		return Snapshot{}, resultError("status", err)
	}
	if len(vals) < 3 {
		return Snapshot{}, fmt.Errorf("status: reply of %d elements", len(vals))
	}
	var snap Snapshot
	snap.Now, _ = vals[0].AsInt64()
	snap.PoolLen, _ = vals[1].AsInt64()
	snap.Transfers, _ = vals[2].AsInt64()
	if snap.PoolLen < 0 {
		return Snapshot{}, fmt.Errorf("status: %w", ErrNoCampaign)
	}
	snap.Meta = make(map[string]string, (len(vals)-3)/2)
	for i := 3; i+1 < len(vals); i += 2 {
		f, _ := vals[i].ToString()
		v, _ := vals[i+1].ToString()
		snap.Meta[f] = v
	}
	return snap, nil
}

// Int reads an integer field of the snapshot's meta; 0 when absent.
func (snap Snapshot) Int(field string) int64 {
	v, _ := strconv.ParseInt(snap.Meta[field], 10, 64)
	return v
}

// Close closes a campaign (or one shard of it) now; changed is false when it was closed already.
func (s *Store) Close(ctx context.Context, k Keys, by string) (state, reason string, changed bool, err error) {
	vals, err := s.s.close.Exec(ctx, s.c, []string{k.Meta}, []string{by}).ToArray()
	if err != nil {
		return "", "", false, resultError("close", err)
	}
	if len(vals) != 3 {
		return "", "", false, fmt.Errorf("close: reply of %d elements", len(vals))
	}
	state, _ = vals[0].ToString()
	reason, _ = vals[1].ToString()
	c, _ := vals[2].AsInt64()
	return state, reason, c == 1, nil
}
