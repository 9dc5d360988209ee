package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

func TestKeySlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3}, // the CRC-16/XMODEM check value
		{"foo", 12182},
		{"", 0},
		{"{user1000}.following", KeySlot("user1000")},
		{"{user1000}.followers", KeySlot("user1000")},
		{"foo{}{bar}", KeySlot("foo{}{bar}")}, // empty tag: the whole key
		{"foo{{bar}}zap", KeySlot("{bar")},
		{"foo{bar}{zap}", KeySlot("bar")},
		{"hb:{c:42}:pool", KeySlot("c:42")},
	} {
		require.Equal(t, tc.slot, KeySlot(tc.key), tc.key)
	}
	id := IDInSlot(777, "camp", func(id string) string { return "hb:{c:" + id + "}:meta" })
	require.Equal(t, 777, KeySlot("hb:{c:"+id+"}:pool"))
	require.True(t, strings.HasPrefix(id, "camp-"))
}

// campaignKeys are keys of one campaign, sharing its hash tag as hongbao's
// keys do.
func campaignKeys(id string) []string {
	tag := "{c:" + id + "}"
	return []string{"hb:" + tag + ":meta", "hb:" + tag + ":pool", "hb:" + tag + ":grants"}
}

var threeKeys = rueidis.NewLuaScript(`
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], 'by', ARGV[1])
return redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3])`)

// TestClusterScriptOnEachMaster: a client given one node's address finds
// the masters, and a script on keys sharing a hash tag runs on the master
// that owns the tag's slot, for a tag on each master.
func TestClusterScriptOnEachMaster(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Equal(t, rueidis.ClientModeCluster, c.Client.Mode())
	require.Len(t, c.Client.Nodes(), 3, "the client found every master from one address")

	base := UniqueID(t)
	for _, master := range c.Addrs()[:3] {
		id, err := c.IDOn(ctx, master, base, func(id string) string { return campaignKeys(id)[0] })
		require.NoError(t, err)
		keys := campaignKeys(id)
		owner, err := c.MasterOf(ctx, keys[1])
		require.NoError(t, err)
		require.Equal(t, master, owner)

		n, err := threeKeys.Exec(ctx, c.Client, keys, []string{master}).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		slot := strconv.Itoa(KeySlot(keys[0]))
		for _, node := range c.Nodes {
			count, err := do(ctx, node.Client, "CLUSTER", "COUNTKEYSINSLOT", slot).AsInt64()
			require.NoError(t, err)
			if node.Addr == master {
				require.EqualValues(t, 3, count, "the keys are on %s", master)
			} else {
				require.Zero(t, count, "no key on %s", node.Addr)
			}
		}
		got, err := do(ctx, c.Node(master).Client, "GET", keys[0]).ToString()
		require.NoError(t, err)
		require.Equal(t, master, got)
	}

	// KeySlot agrees with Redis.
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("k%d:{tag%d}:%s", i, i%7, base)
		if i%3 == 0 {
			key = base + strconv.Itoa(i*7919)
		}
		slot, err := do(ctx, c.Nodes[0].Client, "CLUSTER", "KEYSLOT", key).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, slot, KeySlot(key), key)
	}
	redisCLICheck(t, c.Nodes[0].Addr)
}

// redisCLICheck has redis-cli, a tool independent of this package, check
// that the nodes agree on the slots, cover them all and leave none open.
// Without redis-cli the check is skipped, except under CI=true.
func redisCLICheck(t *testing.T, addr string) {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-cli is not installed; CI must have it (apt-get install -y redis-tools)")
		}
		t.Log("redis-cli is not installed: the cross-check is skipped")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "check", addr).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "All nodes agree about slots configuration")
	require.Contains(t, string(out), "All 16384 slots covered")
	require.NotContains(t, string(out), "[WARNING]")
	require.NotContains(t, string(out), "[ERR]")
}

// writer writes numbered keys of one slot through a cluster client until
// stopped, retrying a write that got TRYAGAIN, and records what was
// acknowledged.
type writer struct {
	acked    atomic.Int64 // writes acknowledged
	tryAgain atomic.Int64 // TRYAGAIN replies seen
	stop     atomic.Bool
	err      error
	done     chan struct{}
}

// startWriter runs write(i) for i = 0, 1, ... in a goroutine until stop;
// a write that fails with TRYAGAIN is retried after a short pause, any other
// error ends the writer.
func startWriter(ctx context.Context, write func(ctx context.Context, i int64) error) *writer {
	w := &writer{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := int64(0); !w.stop.Load(); {
			err := write(ctx, i)
			if rerr, ok := rueidis.IsRedisErr(err); ok && rerr.IsTryAgain() {
				w.tryAgain.Add(1)
				select { // pace the retries, the slot stays split a while
				case <-ctx.Done():
					w.err = ctx.Err()
					return
				case <-time.After(2 * time.Millisecond):
				}
				continue
			}
			if err != nil {
				w.err = fmt.Errorf("write %d: %w", i, err)
				return
			}
			i++
			w.acked.Store(i)
		}
	}()
	return w
}

func (w *writer) halt(t *testing.T) int64 {
	t.Helper()
	w.stop.Store(true)
	<-w.done
	require.NoError(t, w.err)
	return w.acked.Load()
}

var setAndCount = rueidis.NewLuaScript(`
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('INCR', KEYS[2])`)

// TestClusterMigrateSlotUnderLoad: a slot moves to another master while
// two writers keep writing into it; every acknowledged write ends up on
// the target, the source keeps nothing, and the writers were redirected
// (ASK) and told to retry (TRYAGAIN) while the slot was split.
func TestClusterMigrateSlotUnderLoad(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{Masters: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	from, to := c.Nodes[0].Addr, c.Nodes[1].Addr
	slot := 100 // the first master owns 0-8191
	tag := "{" + IDInSlot(slot, UniqueID(t), func(id string) string { return "{" + id + "}" }) + "}"
	const preloaded = 200
	for i := 0; i < preloaded; i++ {
		require.NoError(t, do(ctx, c.Client, "SET", tag+":pre:"+strconv.Itoa(i), "v").Error())
	}
	// A single-key writer: a new key in a migrating slot is created on the
	// target, which the source says with ASK.
	single := startWriter(ctx, func(ctx context.Context, i int64) error {
		return c.Client.Do(ctx, c.Client.B().Set().Key(tag+":s:"+strconv.FormatInt(i, 10)).Value(strconv.FormatInt(i, 10)).Build()).Error()
	})
	// A script on two keys: while the counter and the new key are on
	// different nodes (or the new key is missing on the target), TRYAGAIN.
	script := startWriter(ctx, func(ctx context.Context, i int64) error {
		keys := []string{tag + ":l:" + strconv.FormatInt(i, 10), tag + ":count"}
		return setAndCount.Exec(ctx, c.Client, keys, []string{strconv.FormatInt(i, 10)}).Error()
	})
	require.NoError(t, waitFor(ctx, 10*time.Second, "writers running", func(context.Context) (bool, string) {
		return single.acked.Load() >= 20 && script.acked.Load() >= 20, fmt.Sprintf("acked %d, %d", single.acked.Load(), script.acked.Load())
	}))

	m, err := c.BeginMigration(ctx, slot, to)
	require.NoError(t, err)
	require.Equal(t, from, m.From)
	moved, err := m.Step(ctx, preloaded/2)
	require.NoError(t, err)
	require.Equal(t, preloaded/2, moved)
	// Hold the slot half-migrated until both kinds of redirection were seen.
	atBegin := single.acked.Load()
	require.NoError(t, waitFor(ctx, 10*time.Second, "redirections seen", func(ctx context.Context) (bool, string) {
		r, err := c.Redirects(ctx)
		return err == nil && r.Ask > 0 && script.tryAgain.Load() > 0 && single.acked.Load() >= atBegin+20,
			fmt.Sprintf("%+v, writer saw %d TRYAGAIN, %d writes since the start: %v", r, script.tryAgain.Load(), single.acked.Load()-atBegin, err)
	}))
	left, err := m.Remaining(ctx)
	require.NoError(t, err)
	require.Positive(t, left, "the slot is still split")
	require.NoError(t, m.Finish(ctx))

	// The script writer gets through again once the slot is whole.
	atFinish := script.acked.Load()
	require.NoError(t, waitFor(ctx, 10*time.Second, "script writer resumed", func(context.Context) (bool, string) {
		return script.acked.Load() >= atFinish+20, fmt.Sprintf("acked %d", script.acked.Load())
	}))
	singles, scripted := single.halt(t), script.halt(t)

	owner, err := c.MasterOfSlot(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, to, owner)
	count := func(addr string) int64 {
		n, err := do(ctx, c.Node(addr).Client, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64()
		require.NoError(t, err)
		return n
	}
	require.Zero(t, count(from), "nothing is left on the source")
	require.Equal(t, preloaded+singles+scripted+1, count(to), "preloaded, written and the counter, all on the target")
	target := c.Node(to).Client
	n, err := do(ctx, target, "GET", tag+":count").AsInt64()
	require.NoError(t, err)
	require.Equal(t, scripted, n, "one count per acknowledged script run, none run twice")
	for i := int64(0); i < singles; i++ {
		v, err := do(ctx, target, "GET", tag+":s:"+strconv.FormatInt(i, 10)).ToString()
		require.NoError(t, err)
		require.Equal(t, strconv.FormatInt(i, 10), v)
	}
	r, err := c.Redirects(ctx)
	require.NoError(t, err)
	t.Logf("moved %d keys; %d single writes, %d script runs; %+v; the script writer retried %d times", m.Moved, singles, scripted, r, script.tryAgain.Load())
	require.Positive(t, r.Moved, "the client learnt the new owner from a MOVED")
	redisCLICheck(t, c.Nodes[0].Addr)
}

// TestClusterReplicaTakesOver: a killed master's replica takes over its
// slots with the data written before, and the old master comes back as a
// replica.
func TestClusterReplicaTakesOver(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim, heir := c.Nodes[1].Addr, c.Nodes[3+1].Addr // master 1 and its replica
	id, err := c.IDOn(ctx, victim, UniqueID(t), func(id string) string { return campaignKeys(id)[0] })
	require.NoError(t, err)
	key := campaignKeys(id)[0]
	require.NoError(t, do(ctx, c.Client, "SET", key, "before").Error())
	require.NoError(t, c.WaitReplicated(ctx))

	c.KillNode(victim)
	require.False(t, c.Node(victim).Running())
	require.NoError(t, c.WaitConsistent(ctx))
	owner, err := c.MasterOf(ctx, key)
	require.NoError(t, err)
	require.Equal(t, heir, owner)
	require.NoError(t, waitFor(ctx, 10*time.Second, "the client reads from the new master", func(ctx context.Context) (bool, string) {
		v, err := do(ctx, c.Client, "GET", key).ToString()
		return v == "before", fmt.Sprintf("%q %v", v, err)
	}))

	require.NoError(t, c.RestartNode(ctx, victim))
	require.NoError(t, c.WaitConsistent(ctx))
	role, err := do(ctx, c.Node(victim).Client, "ROLE").ToArray()
	require.NoError(t, err)
	r, _ := role[0].ToString()
	require.Equal(t, "slave", r, "the old master came back as a replica")
	require.NoError(t, do(ctx, c.Client, "SET", key, "after").Error())
	require.NoError(t, c.WaitReplicated(ctx))
	// A cluster replica serves reads only on a READONLY connection.
	var vals []rueidis.RedisResult
	require.NoError(t, c.Node(victim).Client.Dedicated(func(d rueidis.DedicatedClient) error {
		vals = d.DoMulti(ctx, d.B().Readonly().Build(), d.B().Get().Key(key).Build())
		return nil
	}))
	v, err := vals[1].ToString()
	require.NoError(t, err)
	require.Equal(t, "after", v, "the new replica copies the new master")
}

// TestClusterOneMasterTwoReplicas: the node order is masters first, then
// each master's replicas, and a cluster may have a single master.
func TestClusterOneMasterTwoReplicas(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterOptions{Masters: 1, ReplicasPerMaster: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Len(t, c.Nodes, 3)
	slots, err := c.SlotsOf(ctx, c.Nodes[0].Addr)
	require.NoError(t, err)
	require.Len(t, slots, Slots)
	lines, err := clusterNodes(ctx, c.Nodes[0].Client)
	require.NoError(t, err)
	for _, l := range lines {
		if l.addr == c.Nodes[0].Addr {
			require.True(t, l.has("master"))
		} else {
			require.True(t, l.has("slave"), l.addr)
			require.Equal(t, c.ID(c.Nodes[0].Addr), l.master)
		}
	}
	require.NoError(t, do(ctx, c.Client, "SET", "k", "v").Error())
	require.NoError(t, c.WaitReplicated(ctx))
}

func TestTopologyOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"zero cluster", ClusterOptions{}.Validate(), ""},
		{"negative masters", ClusterOptions{Masters: -1}.Validate(), "Masters"},
		{"negative replicas", ClusterOptions{ReplicasPerMaster: -1}.Validate(), "ReplicasPerMaster"},
		{"tiny node timeout", ClusterOptions{NodeTimeout: time.Millisecond}.Validate(), "NodeTimeout"},
		{"cluster AOF", ClusterOptions{AOF: "sometimes"}.Validate(), "AOF"},
		{"zero sentinel", SentinelOptions{}.Validate(), ""},
		{"negative replicas", SentinelOptions{Replicas: -1}.Validate(), "Replicas"},
		{"quorum above sentinels", SentinelOptions{Sentinels: 3, Quorum: 4}.Validate(), "Quorum"},
		{"name with a space", SentinelOptions{MasterName: "a b"}.Validate(), "MasterName"},
		{"sentinel AOF", SentinelOptions{AOF: "sometimes"}.Validate(), "AOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				require.NoError(t, tc.err)
			} else {
				require.ErrorContains(t, tc.err, tc.want)
			}
		})
	}
}
