package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/internal/luascript"
)

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
	shorts        *shortWaits  // the WAITs that fell short; nil when waitN is 0
	tracer        trace.Tracer // nil: no spans
	ns            Namespace    // the prefix of every key the store builds
}

// New returns a Store on client c, a Redis 7 or later. Once c is found
// closed, the store's calls fail with ErrClientClosed (see
// luascript.Guard).
func New(c rueidis.Client) *Store { return &Store{c: luascript.Guard(c), s: modernScripts} }

// NewLegacy returns a Store whose scripts carry no "#!lua" flags line, for
// servers that cannot parse it (Redis before 7, the in-process emulator).
// Such a server may fail a script at its first write when out of memory,
// instead of refusing it up front.
func NewLegacy(c rueidis.Client) *Store { return &Store{c: luascript.Guard(c), s: legacyScripts} }

// WithWait returns a copy of the store whose grabs, discount calls
// (reserve, confirm, cancel), Held reads and transfer steps are answered
// only once replicas replicas hold what they answer, waiting at most
// timeout; one that falls short is an *UnknownError (wrapping a
// *luascript.ShortWaitError): its outcome is unknown, and it is counted
// (WaitShortfalls). An answer a script gave from earlier writes without
// writing is made to wait for them too (see sync.go).
func (s *Store) WithWait(replicas int, timeout time.Duration) *Store {
	c := *s
	c.waitN, c.waitMs = int64(replicas), max(timeout.Milliseconds(), 1)
	c.shorts = &shortWaits{}
	return &c
}

// WithNamespace returns a copy of the store whose keys, registries and
// counters are those of namespace ns.
func (s *Store) WithNamespace(ns Namespace) *Store {
	c := *s
	c.ns = ns
	return &c
}

// NS is the store's namespace: every key of a campaign the store's
// callers build comes from it.
func (s *Store) NS() Namespace { return s.ns }

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
// waits for replicas; a WAIT that falls short is counted under op.
func (s *Store) exec(ctx context.Context, op WaitOp, sc *luascript.Script, keys, args []string) (rueidis.RedisResult, error) {
	return s.execSync(ctx, op, sc, keys, args, nil)
}

// execSync is exec for a batch script that may answer from earlier writes
// without writing: sync (from syncOf) then follows its WAIT (see sync.go).
func (s *Store) execSync(ctx context.Context, op WaitOp, sc *luascript.Script, keys, args []string, sync *luascript.Sync) (rueidis.RedisResult, error) {
	if s.waitN == 0 {
		return sc.Exec(ctx, s.c, keys, args), nil
	}
	res, werr := s.execWait(ctx, sc, keys, args, sync)
	return res, s.countShort(op, werr)
}

// execWait is execSync under WAIT, in a span when the store has a tracer.
func (s *Store) execWait(ctx context.Context, sc *luascript.Script, keys, args []string, sync *luascript.Sync) (rueidis.RedisResult, error) {
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

// argvPool recycles the ARGV of batch script calls (grab.lua and the
// discount scripts): each call encodes its batch into one, which goes back
// as soon as the call returns, since the client copies it into the
// command. A batch then costs no allocation of its own for its ARGV.
var argvPool = sync.Pool{New: func() any { return new([]string) }}

// getArgv returns an empty ARGV with room for n arguments; putArgv gives it
// back after the call.
func getArgv(n int) *[]string {
	a := argvPool.Get().(*[]string)
	if cap(*a) < n {
		*a = make([]string, 0, n)
	}
	return a
}

// putArgv returns a to argvPool, dropping the strings it refers to.
func putArgv(a *[]string) {
	clear(*a)
	*a = (*a)[:0]
	argvPool.Put(a)
}

// Client is the Redis client of the store.
func (s *Store) Client() rueidis.Client { return s.c }

// FormatPacket writes a packet as the scripts carry it: "<seq>:<cents>".
func FormatPacket(seq, cents int64) string {
	var b [41]byte
	out := strconv.AppendInt(b[:0], seq, 10)
	out = append(out, ':')
	return string(strconv.AppendInt(out, cents, 10))
}

// FormatTimedPacket is a packet as a grants-stream entry carries it when
// the entry was written after the grant (a redriven or rebuilt grant):
// "<seq>:<cents>:<ms>", ms being the grant's time (Redis' clock at the
// grab, milliseconds since the epoch), which the entry's own id no
// longer is. Claims and pools never carry it.
func FormatTimedPacket(seq, cents, ms int64) string {
	return FormatPacket(seq, cents) + ":" + strconv.FormatInt(ms, 10)
}

// ParseStreamPacket reads a grants-stream entry's packet: "<seq>:<cents>"
// as grab.lua writes it, whose time is the entry's (entryMS), or
// "<seq>:<cents>:<ms>" (FormatTimedPacket). A worker that predates the
// timed form finds it malformed and moves the entry to the dead stream,
// from which a redrive puts it back: refused loudly, never settled with
// a wrong time.
func ParseStreamPacket(v string, entryMS int64) (seq, cents, ms int64, err error) {
	ms = entryMS
	if i := strings.LastIndexByte(v, ':'); i > 0 && strings.IndexByte(v[:i], ':') > 0 {
		ms, err = strconv.ParseInt(v[i+1:], 10, 64)
		if err != nil || ms < 1 {
			return 0, 0, 0, fmt.Errorf("%w: malformed grant time in %q", ErrCorrupt, v)
		}
		v = v[:i]
	}
	seq, cents, err = ParseClaim(v)
	return seq, cents, ms, err
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

// Shut makes every call of the store, and of its copies, fail with
// ErrClientClosed from now on, without sending anything; the client stays
// open for its other users (luascript.Shut).
func (s *Store) Shut() { luascript.Shut(s.c) }
