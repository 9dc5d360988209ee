package hongbao_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// replicaOf makes replica follow primary and waits until the primary
// counts it among the replicas that acknowledge writes.
func replicaOf(t *testing.T, replica, primaryR *testenv.Redis) {
	primary := primaryR.Addr
	t.Helper()
	ctx := context.Background()
	host, port, _ := strings.Cut(primary, ":")
	c := replica.Client
	require.NoError(t, c.Do(ctx, c.B().Replicaof().Host(host).Port(mustAtoi(t, port)).Build()).Error())
	require.Eventually(t, func() bool {
		info, err := c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 20*time.Second, 20*time.Millisecond)
	p := primaryR.Client
	require.Eventually(t, func() bool {
		// A write, then WAIT on the same connection: WAIT on a connection
		// that wrote nothing counts replicas still in their first sync.
		res := p.DoMulti(ctx, p.B().Incr().Key("replica-check").Build(), p.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := res[1].AsInt64()
		return err == nil && n == 1
	}, 20*time.Second, time.Millisecond)
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', "port %q", s)
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestWaitReplicas: with WaitReplicas 1, a granted packet is on the
// replica when the grab returns; with no replica acknowledging, the grab
// answers ErrOutcomeUnknown, a *ReplicasError that says so, and once a
// replica is back a retry answers ALREADY with the packet that was
// written.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	// No delay before a full sync to a replica (Redis waits 5 s by default
	// for more replicas to share it).
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	replicaOf(t, replica, primary)
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100, Shards: shards})
		for _, u := range []string{"ann", "bob", "cy"} {
			g, err := eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
			require.Equal(t, hongbao.Granted, g.Outcome)
			// Read at once from the replica: the claim is already there.
			k := redisstore.Default.ShardKeys(c.ID, shards, hongbao.HomeShard(u, shards))
			v, err := replica.Client.Do(ctx, replica.Client.B().Hget().Key(k.Claims).Field(u).Build()).ToString()
			require.NoError(t, err, "shards %d user %s", shards, u)
			require.Equal(t, redisstore.FormatPacket(g.Seq, g.Cents), v)
		}
	}

	c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100})
	// The replica leaves: no replica acknowledges any more.
	require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Replicaof().No().One().Build()).Error())
	_, err = eng.Grab(ctx, c.ID, "dee")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	// Unknown for a reason of its own, which it names: the replicas.
	var short *hongbao.ReplicasError
	require.ErrorAs(t, err, &short)
	require.Equal(t, hongbao.ReplicasError{Wanted: 1, Acked: 0}, hongbao.ReplicasError{Wanted: short.Wanted, Acked: short.Acked})
	require.Contains(t, err.Error(), "0 of 1 replicas acknowledged")
	requireOnePrefix(t, err)
	// It was written on the primary: once a replica holds it, the retry
	// answers ALREADY with that packet.
	held, err := primary.Client.Do(ctx, primary.Client.B().Hget().Key(redisstore.Default.CampaignKeys(c.ID).Claims).Field("dee").Build()).ToString()
	require.NoError(t, err)
	replicaOf(t, replica, primary)
	g, err := eng.Grab(ctx, c.ID, "dee")
	require.NoError(t, err)
	require.Equal(t, hongbao.Already, g.Outcome)
	require.Equal(t, held, redisstore.FormatPacket(g.Seq, g.Cents))
}

// recorder is a PacketRecorder that keeps what it was given.
type recorder struct{ got map[string][]int64 }

func (r *recorder) WritePackets(_ context.Context, id string, cents []int64) error {
	r.got[id] = append([]int64(nil), cents...)
	return nil
}

// TestPacketsRecordedAtCreate: the recorder gets every packet, in seq
// order, before the campaign is live, also for a sharded campaign.
func TestPacketsRecordedAtCreate(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	rec := &recorder{got: map[string][]int64{}}
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: rec})
	require.NoError(t, err)
	ctx := context.Background()
	for _, shards := range []int{1, 4} {
		c := create(t, eng, hongbao.Spec{Total: 12_345, Count: 40, Shards: shards})
		got := rec.got[c.ID]
		require.Len(t, got, 40)
		var sum int64
		for _, v := range got {
			sum += v
		}
		require.EqualValues(t, 12_345, sum)
		// The packets the users get are the recorded ones.
		for i := range 40 {
			g, err := eng.Grab(ctx, c.ID, "p"+strconv.Itoa(i))
			require.NoError(t, err)
			require.Equal(t, got[g.Seq-1], g.Cents, "packet %d", g.Seq)
		}
	}
}

// TestNoReplicasIsUnavailable: a primary paired with min-replicas-to-write
// refuses a grab outright while too few replicas follow it: nothing was
// written, and the engine says ErrUnavailable (HTTP 503), never GRANTED.
func TestNoReplicasIsUnavailable(t *testing.T) {
	t.Parallel()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10})
	p := primary.Client
	require.NoError(t, p.Do(ctx, p.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "1").Build()).Error())
	_, err = eng.Grab(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrUnavailable)
	require.NotErrorIs(t, err, hongbao.ErrOutcomeUnknown, "the script did not run")
	n, err := p.Do(ctx, p.B().Hlen().Key(redisstore.Default.CampaignKeys(c.ID).Claims).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")
}

// TestWaitReplicasOnCluster: on a cluster of three masters with a replica
// each, WaitReplicas 1 answers a grant once the replica of the master that
// holds the user's shard has it.
func TestWaitReplicasOnCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.NewCluster(t, testenv.ClusterOptions{Masters: 3, ReplicasPerMaster: 1})
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: cl.Client, WaitReplicas: 1, WaitTimeout: time.Second})
	require.NoError(t, err)
	const shards = 3
	c := create(t, eng, hongbao.Spec{Total: 30_000, Count: 300, Shards: shards})
	for i := range 60 {
		u := "w" + strconv.Itoa(i)
		g, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		k := redisstore.Default.ShardKeys(c.ID, shards, hongbao.HomeShard(u, shards))
		master, err := cl.MasterOf(ctx, k.Claims)
		require.NoError(t, err)
		// The replica of that master holds the claim already.
		found := false
		for _, n := range cl.Nodes[3:] {
			role, err := n.Client.Do(ctx, n.Client.B().Role().Build()).ToArray()
			require.NoError(t, err)
			of, _ := role[1].ToString()
			port, _ := role[2].AsInt64()
			if of+":"+strconv.FormatInt(port, 10) != master {
				continue
			}
			cmd := n.Client.B().Arbitrary("HGET").Keys(k.Claims).Args(u).Build()
			res := n.Client.DoMulti(ctx, n.Client.B().Readonly().Build(), cmd)
			v, err := res[1].ToString()
			require.NoError(t, err, "replica of %s", master)
			require.Equal(t, redisstore.FormatPacket(g.Seq, g.Cents), v)
			found = true
		}
		require.True(t, found, "no replica of %s", master)
	}
}

// TestPauseWaitsForReplicas: with WaitReplicas 1 a pause answers once the
// replica holds the flag; with no replica acknowledging it answers
// ErrOutcomeUnknown (the flag may be written), also for a repeat that
// found the campaign paused, and a retry once a replica is back succeeds.
func TestPauseWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	replicaOf(t, replica, primary)
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100})
	meta := redisstore.Default.CampaignKeys(c.ID).Meta
	_, err = eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	v, err := replica.Client.Do(ctx, replica.Client.B().Hget().Key(meta).Field("paused").Build()).ToString()
	require.NoError(t, err, "the replica holds the pause when it answers")
	require.Equal(t, "1", v)
	n, err := eng.Block(ctx, c.ID, []string{"mallory"})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Replicaof().No().One().Build()).Error())
	_, err = eng.Pause(ctx, c.ID)
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "a repeat that wrote nothing waits too")
	_, err = eng.Resume(ctx, c.ID)
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	_, err = eng.Block(ctx, c.ID, []string{"eve"})
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	replicaOf(t, replica, primary)
	st, err := eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)
}

// TestHealth: the engine's reading of Redis says what a grab would meet:
// ok on a primary that takes writes and has the replicas it waits for;
// the replicas attached against those wanted when too few are; the code
// of Redis's refusal while it takes no writes (NOREPLICAS under
// min-replicas-to-write, READONLY on a demoted primary); unreachable when
// it does not answer. The probe writes only a key of the engine's
// namespace.
func TestHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	plain, err := hongbao.New(hongbao.Config{Redis: primary.Client, Namespace: "health"})
	require.NoError(t, err)
	h := plain.Health(ctx)
	require.True(t, h.Ready(), "%+v", h)
	require.Equal(t, "ok", h.String())
	keys, err := primary.Client.Do(ctx, primary.Client.B().Keys().Pattern("*").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"health:ready"}, keys, "the probe writes its own key in the namespace, nothing else")

	waiting, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	h = waiting.Health(ctx)
	require.False(t, h.Ready())
	require.True(t, h.ReplicasShort())
	require.Equal(t, "0 of 1 replicas attached", h.String())

	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	replicaOf(t, replica, primary)
	h = waiting.Health(ctx)
	require.True(t, h.Ready(), "%+v", h)
	require.Equal(t, 1, h.Replicas)

	p := primary.Client
	require.NoError(t, p.Do(ctx, p.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "2").Build()).Error())
	h = plain.Health(ctx)
	require.False(t, h.Ready())
	require.Equal(t, "NOREPLICAS", h.Redis)
	require.Equal(t, "refuses writes (NOREPLICAS)", h.String())
	require.NoError(t, p.Do(ctx, p.B().ConfigSet().ParameterValue().ParameterValue("min-replicas-to-write", "0").Build()).Error())

	// The engine still speaks to a primary that was demoted.
	onReplica, err := hongbao.New(hongbao.Config{Redis: replica.Client})
	require.NoError(t, err)
	h = onReplica.Health(ctx)
	require.Equal(t, "READONLY", h.Redis, "%+v", h)
	require.False(t, h.Ready())

	require.NoError(t, primary.Server.Stop())
	h = plain.Health(ctx)
	require.Equal(t, "unreachable", h.Redis)
	require.False(t, h.Ready())
	require.Error(t, h.Err)
}
