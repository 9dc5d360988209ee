package hongbao_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/split"
)

// dumpKeys saves keys as DUMP serialises them ("" for a key that does not
// exist), for restoreKeys to put them back.
func dumpKeys(t *testing.T, c rueidis.Client, keys ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			v, err = "", nil
		}
		require.NoError(t, err)
		out[k] = v
	}
	return out
}

// restoreKeys puts keys back as dumpKeys saved them: what a failover to a
// replica that missed every write since the dump leaves of them.
func restoreKeys(t *testing.T, c rueidis.Client, dump map[string]string) {
	t.Helper()
	ctx := context.Background()
	for k, v := range dump {
		require.NoError(t, c.Do(ctx, c.B().Del().Key(k).Build()).Error())
		if v != "" {
			require.NoError(t, c.Do(ctx, c.B().Restore().Key(k).Ttl(0).SerializedValue(v).Build()).Error())
		}
	}
}

// transfer walks one transfer of want packets from src to dst through its
// three steps.
func transfer(t *testing.T, s *redisstore.Store, src, dst redisstore.Keys, dest, want int) redisstore.Transfer {
	t.Helper()
	ctx := context.Background()
	tr, err := s.TakeTransfer(ctx, src, dest, want)
	require.NoError(t, err)
	require.Len(t, tr.Packets, want)
	_, err = s.ApplyTransfer(ctx, dst, tr)
	require.NoError(t, err)
	require.NoError(t, s.FinishTransfer(ctx, src, tr.ID))
	return tr
}

// pooled counts, per seq, the pools that hold the packet.
func pooled(t *testing.T, s *redisstore.Store, layout []redisstore.Keys) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, k := range layout {
		require.NoError(t, s.ScanPool(context.Background(), k, func(seq, _ int64) error { out[seq]++; return nil }))
	}
	return out
}

// TestTransferAfterSourceFailover: the source of a finished transfer
// fails over to a replica that missed it (its meta, pool and records go
// back to a snapshot taken before it, by DUMP and RESTORE here). The next
// transfer from it must not reuse the lost one's id: the destination would
// take it for a repeat and drop its packets, which would then be in no
// pool. Without WaitReplicas the lost transfer's packets are in both pools
// (the limit docs/durability.md states); none is lost.
func TestTransferAfterSourceFailover(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	store := redisstore.New(r.Client)
	const count = 40
	c := create(t, eng, hongbao.Spec{Total: 4000, Count: count, Shards: 2, Split: split.Fixed})
	layout := redisstore.Default.Layout(c.ID, 2)
	src, dst := layout[0], layout[1]

	before := dumpKeys(t, r.Client, src.Meta, src.Pool, src.Xfers)
	first := transfer(t, store, src, dst, 1, 2)
	restoreKeys(t, r.Client, before)
	second := transfer(t, store, src, dst, 1, 4)

	where := pooled(t, store, layout)
	var missing []int64
	for seq := int64(1); seq <= count; seq++ {
		if where[seq] == 0 {
			missing = append(missing, seq)
		}
	}
	require.Empty(t, missing, "packets in no pool after transfers %s and %s", first.ID, second.ID)
	require.NotEqual(t, first.ID, second.ID, "a transfer id the source lost was used again")
	var twice []string
	for seq, n := range where {
		if n > 1 {
			twice = append(twice, redisstore.FormatPacket(seq, 100))
		}
	}
	require.ElementsMatch(t, first.Packets, twice, "only the lost transfer's packets are in two pools")
	// That is not silent: the audit reports it.
	a, err := eng.Audit(context.Background(), c.ID)
	require.NoError(t, err)
	require.False(t, a.OK())
}

// TestTransferAfterDestinationFailover shows the limit without
// WaitReplicas at the other end: a destination that fails over to a
// replica that missed an apply whose record the source then deleted has
// lost those packets. It is not silent: the audit reports them.
// (With WaitReplicas the apply is held by the replicas before the record
// is deleted: TestTransferWaitsForReplicas.)
func TestTransferAfterDestinationFailover(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	store := redisstore.New(r.Client)
	const count = 40
	c := create(t, eng, hongbao.Spec{Total: 4000, Count: count, Shards: 2, Split: split.Fixed})
	layout := redisstore.Default.Layout(c.ID, 2)
	src, dst := layout[0], layout[1]

	before := dumpKeys(t, r.Client, dst.Meta, dst.Pool, dst.Applied)
	lost := transfer(t, store, src, dst, 1, 3)
	restoreKeys(t, r.Client, before)

	where := pooled(t, store, layout)
	var missing []string
	for seq := int64(1); seq <= count; seq++ {
		if where[seq] == 0 {
			missing = append(missing, redisstore.FormatPacket(seq, 100))
		}
	}
	require.ElementsMatch(t, lost.Packets, missing)
	a, err := eng.Audit(context.Background(), c.ID)
	require.NoError(t, err)
	require.False(t, a.OK())
}

// TestTransferApplyChecksContent: a second apply of a transfer id with the
// packets of the first is a no-op; with other packets it is refused, as is
// recovering a record whose id its destination applied with other packets:
// an error, nothing added, the record kept.
func TestTransferApplyChecksContent(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	c := create(t, eng, hongbao.Spec{Total: 4000, Count: 40, Shards: 2, Split: split.Fixed})
	layout := redisstore.Default.Layout(c.ID, 2)
	src, dst := layout[0], layout[1]
	poolLen := func() int64 {
		t.Helper()
		lens, err := store.PoolLengths(ctx, layout)
		require.NoError(t, err)
		return lens[1]
	}

	tr, err := store.TakeTransfer(ctx, src, 1, 3)
	require.NoError(t, err)
	n, err := store.ApplyTransfer(ctx, dst, tr)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	n, err = store.ApplyTransfer(ctx, dst, tr)
	require.NoError(t, err)
	require.Zero(t, n, "a repeat with the same packets")
	had := poolLen()

	for _, other := range [][]string{
		tr.Packets[:2], // fewer
		{tr.Packets[0], tr.Packets[1], "999:100"},     // another packet
		{tr.Packets[2], tr.Packets[1], tr.Packets[0]}, // another order
	} {
		_, err = store.ApplyTransfer(ctx, dst, redisstore.Transfer{ID: tr.ID, Dest: 1, Packets: other})
		require.ErrorIs(t, err, redisstore.ErrTransferConflict, "packets %v", other)
		require.Equal(t, had, poolLen())
	}

	require.NoError(t, store.FinishTransfer(ctx, src, tr.ID))

	// A record whose id the destination applied with other packets (an id
	// used twice): recovery refuses it and keeps the record.
	tr2, err := store.TakeTransfer(ctx, src, 1, 2)
	require.NoError(t, err)
	_, err = store.ApplyTransfer(ctx, dst, redisstore.Transfer{ID: tr2.ID, Dest: 1, Packets: tr2.Packets[:1]})
	require.NoError(t, err)
	had = poolLen()
	done, err := store.Recover(ctx, layout, 0)
	require.ErrorIs(t, err, redisstore.ErrTransferConflict)
	require.Zero(t, done)
	require.Equal(t, had, poolLen())
	ts, err := store.Transfers(ctx, src)
	require.NoError(t, err)
	require.Len(t, ts, 1, "the record stays, for an operator")
}

// replicaWrites counts the commands a replica ran, but for those of the
// replication link's own upkeep (REPLCONF, PING) and the INFO this reads
// with: the writes that reached it from its primary. (The primary's
// replication offset moves for WAIT's own REPLCONF GETACK too.)
func replicaWrites(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" || name == "replconf" || name == "ping" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err, line)
		n += v
	}
	return n
}

// TestTransferWaitsForReplicas: under WaitReplicas, recovery applies a
// record only once the replicas hold it (the take before its apply: else a
// failover of the source to a replica that missed the take puts the
// packets back in its pool while the destination has them too), and a
// repeated apply is acknowledged only once the replicas hold the first (a
// write before the WAIT: on Redis 7.2 and later WAIT on a connection that
// wrote nothing vouches for nothing).
func TestTransferWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	replicaOf(t, replica, primary)
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 4000, Count: 40, Shards: 2, Split: split.Fixed})
	layout := redisstore.Default.Layout(c.ID, 2)
	src, dst := layout[0], layout[1]
	plain := redisstore.New(primary.Client)
	waiting := plain.WithWait(1, 500*time.Millisecond)
	lens := func() []int64 {
		t.Helper()
		l, err := plain.PoolLengths(ctx, layout)
		require.NoError(t, err)
		return l
	}

	// A repeated apply writes before its WAIT.
	tr, err := plain.TakeTransfer(ctx, src, 1, 2)
	require.NoError(t, err)
	_, err = plain.ApplyTransfer(ctx, dst, tr)
	require.NoError(t, err)
	// Count from once the replica ran the first apply.
	require.Eventually(t, func() bool {
		n, err := replica.Client.Do(ctx, replica.Client.B().Llen().Key(dst.Pool).Build()).AsInt64()
		return err == nil && n == lens()[1]
	}, 10*time.Second, time.Millisecond)
	wrote := replicaWrites(t, replica.Client)
	n, err := waiting.ApplyTransfer(ctx, dst, tr)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Greater(t, replicaWrites(t, replica.Client), wrote, "the repeat wrote nothing for its WAIT to wait for")
	done, err := waiting.Recover(ctx, layout, 0)
	require.NoError(t, err)
	require.Equal(t, 1, done)

	// The replica leaves: a take lands on the primary only.
	require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Replicaof().No().One().Build()).Error())
	var short *luascript.ShortWaitError
	_, err = waiting.TakeTransfer(ctx, src, 1, 1)
	require.ErrorAs(t, err, &short, "a take no replica holds")
	_, err = plain.TakeTransfer(ctx, src, 1, 3)
	require.NoError(t, err)
	had := lens()
	_, err = waiting.Recover(ctx, layout, 0)
	require.ErrorAs(t, err, &short)
	require.Equal(t, had, lens(), "applied a take no replica holds")
	ts, err := plain.Transfers(ctx, src)
	require.NoError(t, err)
	require.Len(t, ts, 2)

	// Once a replica holds them, recovery applies both records, and the
	// replica holds the applies when it answers.
	replicaOf(t, replica, primary)
	done, err = waiting.Recover(ctx, layout, 0)
	require.NoError(t, err)
	require.Equal(t, 2, done)
	require.Equal(t, []int64{had[0], had[1] + 4}, lens())
	n2, err := replica.Client.Do(ctx, replica.Client.B().Llen().Key(dst.Pool).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, lens()[1], n2)
}
