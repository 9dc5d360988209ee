package settle_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// follow makes replica copy primary, unless it does, and waits until it
// acknowledges a write made now, and so every write before.
func follow(t *testing.T, replica, primary *testenv.Redis) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := strings.Cut(primary.Addr, ":")
	c := replica.Client
	if role, err := c.Do(ctx, c.B().Role().Build()).ToArray(); err == nil && len(role) > 0 {
		if r, _ := role[0].ToString(); r == "slave" {
			host = "" // following already
		}
	}
	if host != "" {
		require.NoError(t, c.Do(ctx, c.B().Arbitrary("REPLICAOF").Args(host, port).Build()).Error())
	}
	p := primary.Client
	require.Eventually(t, func() bool {
		res := p.DoMulti(ctx, p.B().Incr().Key("replica-check").Build(), p.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := res[1].AsInt64()
		return err == nil && n == 1
	}, 30*time.Second, 5*time.Millisecond)
}

// stall blocks the replica's whole server for d (DEBUG SLEEP): it
// neither applies nor acknowledges what the primary sends meanwhile. It
// returns once the sleep has begun.
func stall(t *testing.T, replica *testenv.Redis, d time.Duration) <-chan struct{} {
	t.Helper()
	// A connection made before the sleep: the sleep has begun once it gets
	// no answer.
	probe := testenv.Client(t, replica.Addr)
	require.NoError(t, probe.Do(context.Background(), probe.B().Ping().Build()).Error())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := replica.Client
		_ = c.Do(context.Background(), c.B().Arbitrary("DEBUG", "SLEEP").Args(strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Build()).Error()
	}()
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return probe.Do(pctx, probe.B().Ping().Build()).Error() != nil
	}, 5*time.Second, time.Millisecond)
	return done
}

// TestWorkerWaitsForReplicas: with WaitReplicas 1 the worker settles only
// grants a replica holds. While the replica stalls, a pass settles
// nothing and dead-letters nothing, also for entries a worker had read
// before and left pending (read again as its own pending history); once
// the replica catches up, everything settles and reconciles.
func TestWorkerWaitsForReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--enable-debug-command", "yes"}})
	follow(t, replica, primary)
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
	require.NoError(t, err)
	e := &env{eng: eng, redis: primary, l: openSQLite(t)}
	// The worker's own client, as a settle process has: none of the
	// grants went out on its connections.
	own := testenv.Client(t, primary.Addr)
	newWorker := func() *settle.Worker {
		w, err := settle.New(settle.Config{Redis: own, Ledger: e.l, Consumer: "w", Logger: quiet(),
			Only: []string{c.ID}, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond, Poll: 5 * time.Millisecond})
		require.NoError(t, err)
		return w
	}
	rain(t, eng, c.ID, 20)
	_, err = newWorker().Drain(ctx)
	require.NoError(t, err)
	requireLedgerGrants(t, e, c.ID, 20)
	follow(t, replica, primary) // the replica acknowledges every write so far

	done := stall(t, replica, 1500*time.Millisecond)
	for i := 20; i < 30; i++ {
		_, err := eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	// A worker read the new entries and died before the ledger.
	es, err := redisstore.New(primary.Client).ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "w", 100, false)
	require.NoError(t, err)
	require.NotEmpty(t, es)
	w := newWorker()
	_, err = w.Pass(ctx)
	var short *luascript.ShortWaitError
	require.True(t, errors.As(err, &short), "a pass while the replica stalls: %v", err)
	requireLedgerGrants(t, e, c.ID, 20)
	g, err := redisstore.New(primary.Client).Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.Zero(t, g.Dead, "nothing dead-lettered")
	require.Positive(t, g.Pending, "the batch stays pending")

	<-done
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	requireLedgerGrants(t, e, c.ID, 30)
	rep, err := settle.Reconcile(ctx, primary.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.Equal(t, "settled", rep.State)
}

func requireLedgerGrants(t *testing.T, e *env, id string, n int64) {
	t.Helper()
	tot, err := e.l.Totals(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, n, tot.GrantCount)
}

// TestWaitNeedsAWrite shows the trap SyncReplicas avoids: while a replica
// stalls with a grant it never received, WAIT on a connection that wrote
// nothing answers at once that the replica holds everything; the write
// SyncReplicas sends first makes the same WAIT see the truth.
func TestWaitNeedsAWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--enable-debug-command", "yes"}})
	follow(t, replica, primary)
	done := stall(t, replica, time.Second)
	k := redisstore.Default.CampaignKeys(testenv.UniqueID(t))
	require.NoError(t, primary.Client.Do(ctx, primary.Client.B().Hset().Key(k.Claims).FieldValue().FieldValue("ann", "1:100").Build()).Error())

	// A bare connection that sends nothing but WAIT.
	conn, err := net.Dial("tcp", primary.Addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n"))
	require.NoError(t, err)
	reply, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ":1\r\n", reply, "a WAIT without a write of its own counts the stalled replica")

	fresh := testenv.OneConnClient(t, primary.Addr)
	err = redisstore.New(fresh).SyncReplicas(ctx, k, 1, 100*time.Millisecond)
	var short *luascript.ShortWaitError
	require.True(t, errors.As(err, &short), "SyncReplicas: %v", err)
	require.EqualValues(t, 0, short.Got)
	<-done
	require.NoError(t, redisstore.New(fresh).SyncReplicas(ctx, k, 1, 5*time.Second))
}

// TestWorkerRecoverWaitsForReplicas: with WaitReplicas 1 the transfers
// the worker finishes wait as the engine's do: a record left by a take
// that no replica holds is not applied (a failover of its source would
// put the packets back in its pool while the destination hands them out
// too) until a replica holds it.
func TestWorkerRecoverWaitsForReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	follow(t, replica, primary)
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 2000, Count: 20, Shards: 2})
	require.NoError(t, err)
	layout := redisstore.Default.Layout(c.ID, 2)
	store := redisstore.New(primary.Client)
	w, err := settle.New(settle.Config{Redis: testenv.Client(t, primary.Addr), Ledger: openSQLite(t), Consumer: "w",
		Logger: quiet(), Only: []string{c.ID}, WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	require.NoError(t, err)

	// The replica leaves; a take lands on the primary alone and its
	// process dies. The record is made old enough for the worker to
	// finish it.
	require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Replicaof().No().One().Build()).Error())
	tr, err := store.TakeTransfer(ctx, layout[0], 1, 3)
	require.NoError(t, err)
	require.NoError(t, primary.Client.Do(ctx, primary.Client.B().Hset().Key(layout[0].Xfers).FieldValue().
		FieldValue(tr.ID, "1|0|"+strings.Join(tr.Packets, ",")).Build()).Error())
	lens, err := store.PoolLengths(ctx, layout)
	require.NoError(t, err)

	_, err = w.Pass(ctx)
	var short *luascript.ShortWaitError
	require.ErrorAs(t, err, &short)
	after, err := store.PoolLengths(ctx, layout)
	require.NoError(t, err)
	require.Equal(t, lens, after, "applied a take no replica holds")

	follow(t, replica, primary)
	_, err = w.Pass(ctx)
	require.NoError(t, err)
	after, err = store.PoolLengths(ctx, layout)
	require.NoError(t, err)
	require.Equal(t, []int64{lens[0], lens[1] + 3}, after)
}
