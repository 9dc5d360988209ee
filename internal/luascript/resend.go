package luascript

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Which failures may be sent again. A script whose reply was lost (a broken
// connection, a timeout) may have run: its outcome is unknown, and only
// the caller may retry it (grab is idempotent per user; every other write
// script here is idempotent too). But some error replies say that Redis
// did not run the command at all, and sending it again as it is is safe:
//
//   - TRYAGAIN: a command on several keys of a slot that is migrating,
//     some of whose keys have moved already (Redis Cluster);
//   - CLUSTERDOWN: the cluster cannot serve the slot now (a failover);
//   - LOADING: the server is loading its data set after a restart.
//
// MOVED and ASK also mean "not run here"; the shared client follows them
// itself, a dedicated connection (ExecWait, DoWait) does not, and
// then they are sent again like the others.

// NotRun reports whether err is an error reply saying that the command did
// not run and can be sent again unchanged.
func NotRun(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	if _, moved := re.IsMoved(); moved {
		return true
	}
	if _, ask := re.IsAsk(); ask {
		return true
	}
	return re.IsTryAgain() || re.IsClusterDown() || re.IsLoading()
}

// Unwritable reports whether err is an error reply saying that the server
// did not run a write because it cannot take writes now: NotRun's
// replies, and NOREPLICAS (fewer good replicas than min-replicas-to-write),
// READONLY (a replica: the client still speaks to a demoted primary),
// MASTERDOWN (a replica that lost its primary). Nothing was written; the
// write may be sent again once the deployment is whole.
func Unwritable(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return NotRun(err) || strings.HasPrefix(msg, "NOREPLICAS") || strings.HasPrefix(msg, "READONLY") ||
		strings.HasPrefix(msg, "MASTERDOWN")
}

// maxResends bounds how often one call is sent again after NotRun errors;
// the pauses grow from 2 ms to 100 ms, so a slot migration's pause of a few
// hundred ms is waited out.
const maxResends = 12

// resend pauses before the next attempt of a call that failed with a NotRun
// error, and reports whether there is one.
func resend(ctx context.Context, err error, attempt int) bool {
	if attempt >= maxResends || !NotRun(err) {
		return false
	}
	t := time.NewTimer(min(2*time.Millisecond<<attempt, 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
