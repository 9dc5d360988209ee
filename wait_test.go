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
// answers ErrOutcomeUnknown, and once a replica is back a retry answers
// ALREADY with the packet that was written.
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
			k := redisstore.ShardKeys(c.ID, shards, hongbao.HomeShard(u, shards))
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
	// It was written on the primary: once a replica holds it, the retry
	// answers ALREADY with that packet.
	held, err := primary.Client.Do(ctx, primary.Client.B().Hget().Key(redisstore.CampaignKeys(c.ID).Claims).Field("dee").Build()).ToString()
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
