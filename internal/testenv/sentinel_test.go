package testenv

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// TestSentinelURL: rueidis.ParseURL reads the URL as the sentinels and the
// master name, and a client made from it writes to the master.
func TestSentinelURL(t *testing.T) {
	t.Parallel()
	s := NewSentinel(t, SentinelOptions{Replicas: 2, MasterName: "camp"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt, err := rueidis.ParseURL(s.URL)
	require.NoError(t, err)
	require.Equal(t, s.SentinelAddrs(), opt.InitAddress)
	require.Equal(t, "camp", opt.Sentinel.MasterSet)
	require.Len(t, s.Sentinels, 3)
	require.Len(t, s.Data, 3)

	client, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	defer client.Close()
	require.Equal(t, rueidis.ClientModeSentinel, client.Mode())
	key := UniqueID(t)
	require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value("v").Build()).Error())
	got, err := do(ctx, s.MasterNode().Client, "GET", key).ToString()
	require.NoError(t, err)
	require.Equal(t, "v", got, "the write reached the master")

	require.NoError(t, s.WaitReplicated(ctx))
	offs, err := s.ReplicaOffsets(ctx)
	require.NoError(t, err)
	require.Len(t, offs, 2)
	master, err := s.MasterOffset(ctx)
	require.NoError(t, err)
	for addr, off := range offs {
		require.GreaterOrEqual(t, off, master, addr)
		got, err := do(ctx, s.Node(addr).Client, "GET", key).ToString()
		require.NoError(t, err)
		require.Equal(t, "v", got, "replica %s has the write", addr)
	}
}

// TestSentinelFailoverUnderLoad: the master is killed while a client made
// from the sentinel URL writes; the sentinels promote the replica, the
// same client writes to it afterwards, every write replicated before the
// crash survived, and the old master comes back as a replica.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	t.Parallel()
	s := NewSentinel(t, SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := UniqueID(t) + ":"
	var (
		acked   sync.Map // key number -> struct{}
		ackedN  atomic.Int64
		failed  atomic.Int64
		stop    atomic.Bool
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
			k := strconv.Itoa(i)
			if err := s.Client.Do(ctx, s.Client.B().Set().Key(prefix+k).Value(k).Build()).Error(); err != nil {
				failed.Add(1)
				select { // pace the writes while the master is gone
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			acked.Store(i, struct{}{})
			ackedN.Add(1)
		}
	}()
	defer func() { stop.Store(true); <-stopped }()
	require.NoError(t, waitFor(ctx, 10*time.Second, "writes", func(context.Context) (bool, string) {
		return ackedN.Load() >= 50, fmt.Sprint(ackedN.Load())
	}))
	// Everything acknowledged before WaitReplicated is on the replica.
	var safe []int
	acked.Range(func(k, _ any) bool { safe = append(safe, k.(int)); return true })
	require.NoError(t, s.WaitReplicated(ctx))

	start := time.Now()
	old := s.KillMaster()
	require.Equal(t, s.Data[0].Addr, old)
	newMaster, err := s.WaitFailover(ctx)
	require.NoError(t, err)
	require.Equal(t, s.Data[1].Addr, newMaster, "the replica was promoted")
	require.Equal(t, newMaster, s.Master())
	t.Logf("failover took %v; %d writes failed meanwhile", time.Since(start), failed.Load())

	afterFailover := ackedN.Load()
	require.NoError(t, waitFor(ctx, 15*time.Second, "the same client writes to the new master", func(context.Context) (bool, string) {
		return ackedN.Load() >= afterFailover+50, fmt.Sprintf("%d acked, %d failed", ackedN.Load(), failed.Load())
	}))
	stop.Store(true)
	<-stopped
	t.Logf("client writes again after %v", time.Since(start))
	for addr := range s.Client.Nodes() {
		require.Equal(t, newMaster, addr, "the client follows the new master")
	}
	nm := s.Node(newMaster).Client
	for _, i := range safe {
		v, err := do(ctx, nm, "GET", prefix+strconv.Itoa(i)).ToString()
		require.NoError(t, err, "write %d acknowledged and replicated before the crash", i)
		require.Equal(t, strconv.Itoa(i), v)
	}
	dbsize, err := do(ctx, nm, "DBSIZE").AsInt64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, dbsize, int64(len(safe))+50, "the writes after the failover are there too")

	// The old master returns as a replica of the new one.
	require.NoError(t, s.RestartAsReplica(ctx, old))
	require.NoError(t, s.WaitReplicated(ctx))
	t.Logf("old master back in sync after %v", time.Since(start))
	role, err := do(ctx, s.Node(old).Client, "ROLE").ToArray()
	require.NoError(t, err)
	r, _ := role[0].ToString()
	require.Equal(t, "slave", r)
	n, err := do(ctx, s.Node(old).Client, "DBSIZE").AsInt64()
	require.NoError(t, err)
	require.Equal(t, dbsize, n, "the old master copied the new one")
}
