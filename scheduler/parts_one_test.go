package scheduler_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

const partsHash = "hb:lease:{scheduler}:parts"

// TestOnePartRefusedLater: a process of one part announces itself as a
// process of several does, so a process counting other parts sees it
// whether it holds the lease or not; and when one counting other parts
// is found live later (it came in while the lease changed hands, or runs
// an older build), the process of one part lets the lease go and settles
// nothing until every process agrees again, as one of several parts does.
func TestOnePartRefusedLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := f.redis.Client
	one := f.startParts(t, rc, "one", 1)
	waitFor(t, "the single lease", 10*time.Second, one.IsLeader)
	ann, err := rc.Do(t.Context(), rc.B().Hgetall().Key(partsHash).Build()).AsStrMap()
	require.NoError(t, err)
	require.Len(t, ann, 1)
	for _, v := range ann {
		require.True(t, strings.HasPrefix(v, "1 "), "announced as a process of one part: %q", v)
	}

	expiry := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	require.NoError(t, rc.Do(t.Context(), rc.B().Hset().Key(partsHash).FieldValue().FieldValue("intruder", "16 "+expiry+" 0,1").Build()).Error())
	// The elector says the lease is gone before the term's work has
	// stopped; HeldParts empties when the pass in flight has finished.
	waitFor(t, "the process of one part to let the lease go and stop its work", 10*time.Second, func() bool {
		return !one.IsLeader() && len(one.HeldParts()) == 0
	})
	require.NoError(t, rc.Do(t.Context(), rc.B().Hdel().Key(partsHash).Field("intruder").Build()).Error())
	waitFor(t, "the process of one part to take the lease again", 10*time.Second, one.IsLeader)
}

// TestOnePartDrainRefused: a drain of one part, which takes no lease, is
// refused next to a live process counting other parts, as a drain of
// several parts and every started process are.
func TestOnePartDrainRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startParts(t, f.redis.Client, "sixteen", 16)
	waitFor(t, "the announcement", 10*time.Second, func() bool {
		n, err := f.redis.Client.Do(t.Context(), f.redis.Client.B().Hlen().Key(partsHash).Build()).AsInt64()
		return err == nil && n == 1
	})
	for _, parts := range []int{1, 8} {
		s, err := scheduler.New(scheduler.Config{Settle: settle.Config{Redis: f.redis.Client, Ledger: f.led, Consumer: "drain"},
			Parts: parts, LeaseTTL: partsTTL, Logger: quiet()})
		require.NoError(t, err)
		_, err = s.Drain(context.Background())
		require.ErrorIs(t, err, scheduler.ErrParts, "a drain of %d parts next to 16", parts)
	}
}
