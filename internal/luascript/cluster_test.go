package luascript_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/testenv"
)

// countBoth counts a run in each of its two keys, which share a slot.
const countBoth = "#!lua\nredis.call('INCR', KEYS[1])\nreturn redis.call('INCR', KEYS[2])\n"

// TestExecOnMigratingSlot: on a real Redis Cluster, a script on two keys
// of a slot that is half migrated (one key moved, one not) is refused by
// Redis with TRYAGAIN without running, which NotRun recognises; Exec sends
// it again until the migration finishes, and it runs exactly once. A
// script whose reply is lost on its way from a cluster node is never sent
// again: it ran once, and its outcome is unknown to the caller.
func TestExecOnMigratingSlot(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	t.Logf("cluster made by %s in %v", c.CreatedBy, time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, _ := testenv.SlotRange(0, 3)
	slot := first + 77
	tag := testenv.IDInSlot(slot, testenv.UniqueID(t), func(id string) string { return "{" + id + "}" })
	keys := []string{"t:{" + tag + "}:a", "t:{" + tag + "}:b"}
	count := luascript.New(countBoth)
	runs := func() (a, b int64) {
		t.Helper()
		// One key at a time: a command on both would get TRYAGAIN while
		// they are on different nodes.
		a, err := c.Client.Do(ctx, c.Client.B().Get().Key(keys[0]).Build()).AsInt64()
		require.NoError(t, err)
		b, err = c.Client.Do(ctx, c.Client.B().Get().Key(keys[1]).Build()).AsInt64()
		require.NoError(t, err)
		return a, b
	}
	n, err := count.Exec(ctx, c.Client, keys, nil).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	m, err := c.BeginMigration(ctx, slot, c.Nodes[1].Addr)
	require.NoError(t, err)
	moved, err := m.Step(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, moved, "one key on each side: the slot is split")

	// Sent once, as rueidis sends it, Redis refuses it before running it.
	err = rueidis.NewLuaScript(countBoth).Exec(ctx, c.Client, keys, nil).Error()
	re, ok := rueidis.IsRedisErr(err)
	require.True(t, ok, "a Redis error reply: %v", err)
	require.True(t, re.IsTryAgain(), "TRYAGAIN: %v", err)
	require.True(t, luascript.NotRun(err))
	var plain luascript.Errors
	var ue *luascript.UnknownError
	require.False(t, errors.As(plain.Wrap("count", err), &ue), "a refusal is not an unknown outcome")
	a, b := runs()
	require.Equal(t, [2]int64{1, 1}, [2]int64{a, b}, "the refused script did not run")

	// Exec sends it again until the slot is whole, then it runs once.
	before, err := c.Redirects(ctx)
	require.NoError(t, err)
	done := make(chan rueidis.RedisResult, 1)
	go func() { done <- count.Exec(ctx, c.Client, keys, nil) }()
	require.NoError(t, waitUntil(ctx, "Exec refused twice", func() (bool, string) {
		r, err := c.Redirects(ctx)
		return err == nil && r.TryAgain >= before.TryAgain+2, fmt.Sprintf("%+v %v", r, err)
	}))
	select {
	case r := <-done:
		t.Fatalf("Exec returned while the slot was split: %v", r.Error())
	default:
	}
	require.NoError(t, m.Finish(ctx))
	n, err = (<-done).AsInt64()
	require.NoError(t, err, "sent again after the migration")
	require.EqualValues(t, 2, n)
	a, b = runs()
	require.Equal(t, [2]int64{2, 2}, [2]int64{a, b}, "every refused send ran nowhere, the last ran once")
	after, err := c.Redirects(ctx)
	require.NoError(t, err)
	t.Logf("redirects during the test: %+v -> %+v", before, after)

	lostReplyOnNode(t, ctx, c.Node(m.To).Addr, keys)
	a, b = runs()
	require.Equal(t, [2]int64{4, 4}, [2]int64{a, b}, "the script whose reply was lost ran once, and was not sent again")
}

// lostReplyOnNode runs countBoth on keys twice through a proxy in front of
// the cluster node at addr, which owns them; the second reply is lost.
func lostReplyOnNode(t *testing.T, ctx context.Context, addr string, keys []string) {
	t.Helper()
	proxy := testenv.NewProxy(t, addr)
	// One connection, to this node alone: a cluster client would find the
	// nodes' own addresses and go around the proxy.
	pc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{proxy.Addr}, DisableCache: true, ForceSingleClient: true, PipelineMultiplex: -1,
	})
	require.NoError(t, err)
	defer pc.Close()
	count := luascript.New(countBoth)
	n, err := count.Exec(ctx, pc, keys, nil).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "loaded on the node; the next call is an EVALSHA")

	proxy.DropNextReply()
	err = count.Exec(ctx, pc, keys, nil).Error()
	require.Error(t, err)
	require.False(t, luascript.NotRun(err), "a lost reply is not a refusal: %v", err)
	var plain luascript.Errors
	var ue *luascript.UnknownError
	require.ErrorAs(t, plain.Wrap("count", err), &ue, "the outcome is unknown")
}

// waitUntil polls cond every 2 ms until it holds, or fails after 10 s.
func waitUntil(ctx context.Context, what string, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	last := ""
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not reached; last seen: %s", what, last)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
