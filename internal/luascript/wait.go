package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// Waiting for replicas. Redis replicates asynchronously: a script's
// writes are on the primary when its reply arrives, not yet on any
// replica, and a failover to a replica that missed them loses them. WAIT
// numreplicas timeout, sent on the same connection right after the script,
// blocks until that many replicas acknowledged every write the connection
// made before it, or the timeout passes, and answers how many did.
//
// ExecWait sends the script and WAIT together, in one round trip on one
// connection of its own (rueidis.Client.Dedicate: the pool rueidis takes
// a connection from anyway for a call that holds a blocking command such
// as WAIT; on a cluster, the connection of the slot of the script's first
// key, the script's own node). One WAIT covers a whole batch of users, so
// coalescing makes it cheap.
//
// What WAIT covers. WAIT waits for the replication offset the connection
// stood at after its last write. Redis before 7.2 sets that offset after
// every command, writing or not; Redis 7.2 and later only after a command
// that propagated something (tried on 7.0.15 and 7.2.6; see
// docs/durability.md). So on 7.2 a script that wrote nothing (a grab answered
// ALREADY only, a repeated confirm) leaves the offset where an older call
// of that pooled connection left it (0 on a fresh one), and its WAIT may
// answer at once, counting replicas that lack what the script answered
// from. A script
// that wrote propagated its writes after every write the node made
// before, so its WAIT covers those too. ExecWaitSync handles the first
// case: the caller says from the reply whether the script may have
// answered without writing, and then a small write in the script's slot
// and a second WAIT follow, on the same connection, so on the same node
// that ran the script.

// ShortWaitError says that fewer replicas than asked acknowledged a
// script's writes within the timeout: the writes are on the primary and
// maybe on no replica, so whether they survive a failover is unknown.
type ShortWaitError struct{ Want, Got int64 }

func (e *ShortWaitError) Error() string {
	return fmt.Sprintf("%d of %d replicas acknowledged the writes in time", e.Got, e.Want)
}

// sha is the SHA-1 of src in hex, as EVALSHA names a script.
func sha(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// ExecWait runs the script on c, then WAIT replicas timeout on the same
// connection. A script error is returned in the result as Exec returns it
// (and WAIT's answer is then not looked at); a WAIT that got fewer
// acknowledgements than replicas is a *ShortWaitError, which Errors.Wrap
// files as an unknown outcome. replicas 0 is Exec.
func (s *Script) ExecWait(ctx context.Context, c rueidis.Client, keys, args []string, replicas int64, timeoutMs int64) (rueidis.RedisResult, error) {
	return s.ExecWaitSync(ctx, c, keys, args, replicas, timeoutMs, nil)
}

// Sync says, from a script's reply, whether the script may have answered
// from writes made before it without writing anything itself; if so,
// write is a write in the script's slot that ExecWaitSync sends, with a
// second WAIT, before it trusts the answer.
type Sync struct {
	Silent func(rueidis.RedisResult) bool
	Write  func() rueidis.Completed
}

// ExecWaitSync is ExecWait, and when sync is not nil and sync.Silent
// says the script may have written nothing, it then sends sync.Write and
// WAIT again on the same connection (so to the node that ran the script),
// and answers the script's result only when that WAIT is full too. A
// failed sync write is returned as the error; the script's result is
// returned with it.
func (s *Script) ExecWaitSync(ctx context.Context, c rueidis.Client, keys, args []string, replicas int64, timeoutMs int64, sync *Sync) (rueidis.RedisResult, error) {
	if replicas <= 0 {
		return s.Exec(ctx, c, keys, args), nil
	}
	for attempt := 0; ; attempt++ {
		res, err := s.execWaitOnce(ctx, c, keys, args, replicas, timeoutMs, sync)
		if serr := res.Error(); serr != nil && resend(ctx, serr, attempt) {
			continue
		}
		return res, err
	}
}

// execWaitOnce is one attempt of ExecWaitSync, on one connection.
func (s *Script) execWaitOnce(ctx context.Context, c rueidis.Client, keys, args []string, replicas, timeoutMs int64, sync *Sync) (rueidis.RedisResult, error) {
	slot := ""
	if len(keys) > 0 {
		slot = keys[0]
	}
	dc := dedicate(c)
	defer dc.done()
	n := strconv.Itoa(len(keys))
	res := dc.do(ctx, c.B().Arbitrary("EVALSHA").Args(s.sha, n).Keys(keys...).Args(args...).Build(), waitCmd(c, replicas, timeoutMs, slot))
	if re, ok := rueidis.IsRedisErr(res[0].Error()); ok && re.IsNoScript() {
		eval := c.B().Arbitrary("EVAL").Args(s.src, n).Keys(keys...).Args(args...).Build()
		res = dc.do(ctx, eval, waitCmd(c, replicas, timeoutMs, slot))
	}
	if res[0].Error() != nil {
		return res[0], nil
	}
	if err := waited(res[1], replicas); err != nil || sync == nil || !sync.Silent(res[0]) {
		return res[0], err
	}
	w := sync.Write()
	again := dc.do(ctx, w, waitCmd(c, replicas, timeoutMs, slot))
	if err := again[0].Error(); err != nil {
		return res[0], fmt.Errorf("sync write: %w", err)
	}
	return res[0], waited(again[1], replicas)
}

// waitCmd is WAIT replicas timeoutMs, routed on a cluster to the slot of
// key ("" for none).
func waitCmd(c rueidis.Client, replicas, timeoutMs int64, key string) rueidis.Completed {
	w := c.B().Wait().Numreplicas(replicas).Timeout(timeoutMs).Build()
	if key != "" {
		w = w.SetSlot(key)
	}
	return w
}

// waited reads WAIT's reply: a *ShortWaitError when fewer than replicas
// acknowledged.
func waited(r rueidis.RedisResult, replicas int64) error {
	got, err := r.AsInt64()
	if err != nil {
		return fmt.Errorf("WAIT: %w", err)
	}
	if got < replicas {
		return &ShortWaitError{Want: replicas, Got: got}
	}
	return nil
}

// WriteWait sends a write of one key (built afresh by write for each
// attempt), then WAIT replicas timeoutMs on the same connection, as
// ExecWait sends a script: in one round trip, on a connection of its own
// (on a cluster, to the key's node), the write sent again when that node
// answers that it did not run it. It returns the write's error, or a
// *ShortWaitError when fewer replicas acknowledged it in time. The
// replicas that acknowledged it hold every write the node made before it,
// on whatever connection.
func WriteWait(ctx context.Context, c rueidis.Client, write func() rueidis.Completed, key string, replicas, timeoutMs int64) error {
	_, err := DoWait(ctx, c, func() []rueidis.Completed { return []rueidis.Completed{write()} }, key, replicas, timeoutMs)
	return err
}

// DoWait sends cmds (built afresh by cmds for each attempt, all in the
// slot of key, the last a write), then WAIT replicas timeoutMs, in one
// round trip on a connection of its own, as WriteWait does; all of them
// are sent again when one answers that it did not run. It returns the
// results of cmds and the first error among them (a nil reply is none),
// else a *ShortWaitError when fewer replicas acknowledged in time. When
// it returns no error, what the commands before the write read is on the
// replicas that acknowledged: they hold every write the node made before
// the write.
func DoWait(ctx context.Context, c rueidis.Client, cmds func() []rueidis.Completed, key string, replicas, timeoutMs int64) ([]rueidis.RedisResult, error) {
	for attempt := 0; ; attempt++ {
		res := doOnOneConn(ctx, c, append(cmds(), waitCmd(c, replicas, timeoutMs, key)))
		var err error
		for _, r := range res[:len(res)-1] {
			if err = r.Error(); err != nil && !rueidis.IsRedisNil(err) {
				break
			}
			err = nil
		}
		if err != nil && resend(ctx, err, attempt) {
			continue
		}
		if err != nil {
			return res[:len(res)-1], err
		}
		return res[:len(res)-1], waited(res[len(res)-1], replicas)
	}
}

// doOnOneConn sends cmds in one round trip on a connection of its own. On
// a Redis Cluster that is the connection to the slot's node: the shared
// client would follow a MOVED or ASK for a command alone and leave WAIT on
// the node that redirected it, which would then vouch for writes it never
// saw. A dedicated connection follows no redirect: the command comes back
// MOVED or ASK, not run, and is sent again (see NotRun).
func doOnOneConn(ctx context.Context, c rueidis.Client, cmds []rueidis.Completed) []rueidis.RedisResult {
	dc := dedicate(c)
	defer dc.done()
	return dc.do(ctx, cmds...)
}

// oneConn is a connection of c's own (rueidis.Client.Dedicate).
type oneConn struct {
	dc      rueidis.DedicatedClient
	release func()
	broken  bool
}

func dedicate(c rueidis.Client) *oneConn {
	dc, release := c.Dedicate()
	return &oneConn{dc: dc, release: release}
}

// do sends cmds in one round trip.
func (o *oneConn) do(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	res := o.dc.DoMulti(ctx, cmds...)
	for _, r := range res {
		if r.NonRedisError() != nil {
			o.broken = true
		}
	}
	return res
}

// done gives the connection back, or closes it when a reply was cut
// short (a timeout, a cancelled context, a broken connection): a late
// reply must not meet the connection's next user.
func (o *oneConn) done() {
	if o.broken {
		o.dc.Close()
		return
	}
	o.release()
}
