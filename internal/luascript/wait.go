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
// connection (rueidis sends a multi-command call that holds a blocking
// command such as WAIT on one connection of its pool, in order; on a
// cluster, WAIT is routed to the slot of the script's first key, the
// script's own node). One WAIT covers a whole batch of users, so
// coalescing makes it cheap.

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
	if replicas <= 0 {
		return s.Exec(ctx, c, keys, args), nil
	}
	wait := func() rueidis.Completed {
		w := c.B().Wait().Numreplicas(replicas).Timeout(timeoutMs).Build()
		if len(keys) > 0 {
			w = w.SetSlot(keys[0])
		}
		return w
	}
	n := strconv.Itoa(len(keys))
	evalsha := c.B().Arbitrary("EVALSHA").Args(s.sha, n).Keys(keys...).Args(args...).Build()
	res := c.DoMulti(ctx, evalsha, wait())
	for attempt := 0; ; attempt++ {
		if err := res[0].Error(); err != nil {
			if re, ok := rueidis.IsRedisErr(err); ok && re.IsNoScript() {
				eval := c.B().Arbitrary("EVAL").Args(s.src, n).Keys(keys...).Args(args...).Build()
				res = c.DoMulti(ctx, eval, wait())
				continue
			}
			if resend(ctx, err, attempt) {
				res = c.DoMulti(ctx, evalsha, wait())
				continue
			}
			return res[0], nil
		}
		break
	}
	got, err := res[1].AsInt64()
	if err != nil {
		return res[0], fmt.Errorf("WAIT: %w", err)
	}
	if got < replicas {
		return res[0], &ShortWaitError{Want: replicas, Got: got}
	}
	return res[0], nil
}
