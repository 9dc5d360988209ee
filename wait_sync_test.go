package hongbao_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// replicated starts a primary with one replica that follows it and an
// engine that waits for that replica.
func replicated(t *testing.T) (primary, replica *testenv.Redis, eng *hongbao.Engine) {
	t.Helper()
	primary = testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica = testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	replicaOf(t, replica, primary)
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	return primary, replica, eng
}

// leave makes the replica stop following its primary: from then on no
// replica acknowledges anything.
func leave(t *testing.T, replica *testenv.Redis) {
	t.Helper()
	c := replica.Client
	require.NoError(t, c.Do(context.Background(), c.B().Replicaof().No().One().Build()).Error())
}

// getKey reads key on r: "" when absent.
func getKey(t *testing.T, r *testenv.Redis, key string) string {
	t.Helper()
	v, err := r.Client.Do(context.Background(), r.Client.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// delReplicated deletes key on the primary and waits until the replica
// has the deletion too.
func delReplicated(t *testing.T, primary *testenv.Redis, key string) {
	t.Helper()
	p := primary.Client
	res := p.DoMulti(context.Background(), p.B().Del().Key(key).Build(), p.B().Wait().Numreplicas(1).Timeout(5000).Build())
	require.NoError(t, res[0].Error())
	n, err := res[1].AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// TestHeldWaitsForReplicas: with WaitReplicas, Engine.Held (GET
// .../grants/me) answers a packet only once a replica holds it. While no
// replica follows, a packet written on the primary alone (its grab
// answered ErrOutcomeUnknown) is not reported held: ErrOutcomeUnknown
// again, never the packet, which a failover would hand to someone else.
// A user who holds nothing is told so. Once a replica holds the packet,
// Held answers it.
func TestHeldWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary, replica, eng := replicated(t)
	ctx := context.Background()
	var ids []string
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100, Shards: shards})
		ids = append(ids, c.ID)
		g, err := eng.Grab(ctx, c.ID, "ann")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		h, err := eng.Held(ctx, c.ID, "ann")
		require.NoError(t, err)
		require.Equal(t, g.Seq, h.Seq)
	}
	leave(t, replica)
	for i, id := range ids {
		_, err := eng.Grab(ctx, id, "dee")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
		_, err = eng.Held(ctx, id, "dee")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "campaign %d: a packet no replica holds", i)
		_, err = eng.Held(ctx, id, "ann")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "campaign %d: no replica vouches for it now", i)
		_, err = eng.Held(ctx, id, "nobody")
		require.ErrorIs(t, err, hongbao.ErrNoGrant)
	}
	replicaOf(t, replica, primary)
	for i, id := range ids {
		h, err := eng.Held(ctx, id, "dee")
		require.NoError(t, err, "campaign %d", i)
		shards := 1 + 2*i
		k := redisstore.Default.ShardKeys(id, shards, hongbao.HomeShard("dee", shards))
		v, err := replica.Client.Do(ctx, replica.Client.B().Hget().Key(k.Claims).Field("dee").Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, v, redisstore.FormatPacket(h.Seq, h.Cents))
	}
}

// TestAlreadyWaitsForItsGrant: a grab batch answered ALREADY only wrote
// nothing. On Redis 7.2 and later such a batch moves no replication
// offset, and the WAIT behind it would vouch for nothing; so the engine
// writes the shard's sync key and waits again before it answers. On the
// Redis 7.0 of the tests every command moves the offset, which hides the
// hole; the test sees the fix by the sync write on the replica. A batch
// that granted moved the offset itself and writes no sync key (one round
// trip on the hot path). With no replica following, an ALREADY answers
// ErrOutcomeUnknown.
func TestAlreadyWaitsForItsGrant(t *testing.T) {
	t.Parallel()
	primary, replica, eng := replicated(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100, Shards: shards})
		for i := range 4 {
			u := "u" + strconv.Itoa(i)
			k := redisstore.Default.ShardKeys(c.ID, shards, hongbao.HomeShard(u, shards))
			delReplicated(t, primary, k.Sync)
			g, err := eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
			require.Equal(t, hongbao.Granted, g.Outcome)
			require.Empty(t, getKey(t, primary, k.Sync), "a batch that granted needs no sync write")

			again, err := eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
			require.Equal(t, hongbao.Already, again.Outcome)
			require.Equal(t, g.Seq, again.Seq)
			require.Equal(t, "1", getKey(t, replica, k.Sync), "shards %d user %s: the ALREADY batch's sync write is on the replica", shards, u)
		}
	}
	c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100})
	_, err := eng.Grab(ctx, c.ID, "ann")
	require.NoError(t, err)
	leave(t, replica)
	_, err = eng.Grab(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
}

// TestDiscountWaitReplicas: with WaitReplicas, reserve, confirm and
// cancel answer only once a replica holds what they answer, as a grab
// does: while no replica follows, each answers ErrOutcomeUnknown, the
// repeats (answered from earlier writes) too; once a replica follows
// again, the repeats answer what was written, and a repeat that wrote
// nothing made the replica hold its answer by the shard's sync write.
func TestDiscountWaitReplicas(t *testing.T) {
	t.Parallel()
	primary, replica, eng := replicated(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 10_000, Quota: 100,
			Min: 10, Max: 100, Shards: shards, Hold: time.Minute})
		require.NoError(t, err)
		// Answered: the replica holds the reservation already.
		r, err := eng.Discounts().Reserve(ctx, d.ID, "ann", "o1", 5_000)
		require.NoError(t, err)
		require.Equal(t, hongbao.Reserved, r.Outcome)
		k := redisstore.Default.DiscountShardKeys(d.ID, shards, hongbao.HomeShard("ann", shards))
		rec, err := replica.Client.Do(ctx, replica.Client.B().Hget().Key(k.Resv).Field(redisstore.OrderKey("ann", "o1")).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, byte('r'), rec[0])
		_, err = eng.Discounts().Reserve(ctx, d.ID, "bob", "o1", 5_000)
		require.NoError(t, err)

		leave(t, replica)
		_, err = eng.Discounts().Reserve(ctx, d.ID, "cy", "o1", 5_000)
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: reserve", shards)
		_, err = eng.Discounts().Reserve(ctx, d.ID, "ann", "o1", 5_000)
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: repeated reserve", shards)
		_, err = eng.Discounts().Confirm(ctx, d.ID, "ann", "o1")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: confirm", shards)
		_, err = eng.Discounts().Confirm(ctx, d.ID, "ann", "o1")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: repeated confirm", shards)
		_, err = eng.Discounts().Cancel(ctx, d.ID, "bob", "o1")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: cancel", shards)
		_, err = eng.Discounts().Cancel(ctx, d.ID, "ann", "o1")
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "shards %d: cancel of a confirmed order", shards)

		replicaOf(t, replica, primary)
		for _, u := range []string{"ann", "bob", "cy"} {
			hk := redisstore.Default.DiscountShardKeys(d.ID, shards, hongbao.HomeShard(u, shards)).Keys()
			delReplicated(t, primary, hk.Sync)
			switch u {
			case "ann":
				c, err := eng.Discounts().Confirm(ctx, d.ID, u, "o1")
				require.NoError(t, err)
				require.True(t, c.Again)
			case "bob":
				c, err := eng.Discounts().Cancel(ctx, d.ID, u, "o1")
				require.NoError(t, err)
				require.True(t, c.Again)
			case "cy":
				r, err := eng.Discounts().Reserve(ctx, d.ID, u, "o1", 5_000)
				require.NoError(t, err)
				require.Equal(t, hongbao.ReservedAlready, r.Outcome)
			}
			require.Equal(t, "1", getKey(t, replica, hk.Sync), "shards %d user %s: the repeat's sync write is on the replica", shards, u)
		}
	}
}

// TestWaitSyncOnCluster: on a cluster of three masters with a replica
// each, the answers that rest on earlier writes (a repeated grab, Held, a
// repeated reserve and confirm) wait on the node of the user's shard: the
// sync write and its WAIT go to the connection that ran the script, in
// the shard's slot.
func TestWaitSyncOnCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.NewCluster(t, testenv.ClusterOptions{Masters: 3, ReplicasPerMaster: 1})
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: cl.Client, WaitReplicas: 1, WaitTimeout: time.Second})
	require.NoError(t, err)
	const shards = 3
	c := create(t, eng, hongbao.Spec{Total: 30_000, Count: 300, Shards: shards})
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 10_000, Quota: 100,
		Min: 10, Max: 100, Shards: shards, Hold: time.Minute})
	require.NoError(t, err)
	for i := range 12 {
		u := "w" + strconv.Itoa(i)
		g, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		again, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Already, again.Outcome)
		h, err := eng.Held(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, g.Seq, h.Seq)
		k := redisstore.Default.ShardKeys(c.ID, shards, hongbao.HomeShard(u, shards))
		v, err := cl.Client.Do(ctx, cl.Client.B().Get().Key(k.Sync).Build()).ToString()
		require.NoError(t, err, "the sync key of %s", k.Tag)
		require.Equal(t, "1", v)

		for range 2 {
			r, err := eng.Discounts().Reserve(ctx, d.ID, u, "o1", 5_000)
			require.NoError(t, err)
			require.True(t, r.Outcome.HasAmount())
			_, err = eng.Discounts().Confirm(ctx, d.ID, u, "o1")
			require.NoError(t, err)
		}
	}
}

// stallReplica blocks the replica's whole server for d (DEBUG SLEEP): it
// neither applies nor acknowledges what the primary sends meanwhile, yet
// stays connected, so WAIT still counts it by what it acknowledged
// before. It returns once the sleep has begun; the channel closes when it
// ends.
func stallReplica(t *testing.T, replica *testenv.Redis, d time.Duration) <-chan struct{} {
	t.Helper()
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

// TestRetryOnAnotherEngineWaits: the retry of a grab whose outcome was
// unknown lands on another engine (another serve process), whose
// connections wrote nothing yet, while the replica lags behind the grant.
// On Redis 7.2 and later the script answering ALREADY wrote nothing and
// moves no offset: a WAIT behind it alone would count the lagging replica
// and vouch for a packet it lacks. The engine writes the shard's sync key
// first, so the retry, the held packet and a repeated confirm answer
// ErrOutcomeUnknown until the replica holds them, on every version. (On
// Redis 7.0 every command moves the offset and the first two pass without
// the sync write too; Held never waited before.)
func TestRetryOnAnotherEngineWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--enable-debug-command", "yes"}})
	replicaOf(t, replica, primary)
	newEngine := func() *hongbao.Engine {
		eng, err := hongbao.New(hongbao.Config{Redis: testenv.Client(t, primary.Addr), WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		return eng
	}
	a := newEngine()
	c := create(t, a, hongbao.Spec{Total: 10_000, Count: 100})
	d, err := a.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 10_000, Quota: 100,
		Min: 10, Max: 100, Hold: time.Minute})
	require.NoError(t, err)
	_, err = a.Discounts().Reserve(ctx, d.ID, "ann", "o1", 5_000)
	require.NoError(t, err)

	done := stallReplica(t, replica, 3*time.Second)
	_, err = a.Grab(ctx, c.ID, "dee")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	b := newEngine()
	_, err = b.Grab(ctx, c.ID, "dee")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "ALREADY of a packet the replica lacks")
	_, err = b.Held(ctx, c.ID, "dee")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "held: a packet the replica lacks")
	_, err = a.Discounts().Confirm(ctx, d.ID, "ann", "o1")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "a confirm the replica lacks")
	_, err = b.Discounts().Confirm(ctx, d.ID, "ann", "o1")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "a repeated confirm the replica lacks")
	<-done

	// Once the replica caught up, the retries answer what was written.
	require.Eventually(t, func() bool {
		g, err := b.Grab(ctx, c.ID, "dee")
		return err == nil && g.Outcome == hongbao.Already
	}, 10*time.Second, 10*time.Millisecond)
	r, err := b.Discounts().Confirm(ctx, d.ID, "ann", "o1")
	require.NoError(t, err)
	require.True(t, r.Again)
}
