package rebuild_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// TestRebuildStaleTransferApply: a transfer taken from shard 0 before a
// rebuild, its apply to shard 1 still in hand (an engine's Borrow between
// its two steps, a worker's Recover behind its replica wait) while the
// rebuild runs. The rebuild reads the record, places its packets (here in
// the pools: no block was opened) and swaps every shard, its transfers
// and applied ids with it. The apply that lands after must add nothing:
// its packets are in the rebuilt pools already, and added again they
// would be granted twice. Before, the rebuilt shard, whose applied hash
// the swap emptied, took them.
func TestRebuildStaleTransferApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	c := e.create(40, 2)
	store := redisstore.New(e.r.Client)
	shards := redisstore.Default.Layout(c.ID, 2)
	tr, err := store.TakeTransfer(ctx, shards[0], 1, 5)
	require.NoError(t, err)
	require.Len(t, tr.Packets, 5)

	rep, err := e.rebuild(e.r.Client, c.ID, true)
	require.NoError(t, err)
	require.EqualValues(t, 40, rep.RestoredPool, "the record's packets are back in the pools")
	requireAudit(t, e.eng, c.ID)

	n, err := store.ApplyTransfer(ctx, shards[1], tr)
	require.Error(t, err, "a transfer taken before the rebuild is not applied to the rebuilt shard")
	require.Zero(t, n)
	requireAudit(t, e.eng, c.ID)
	requireNewUsersGetThePool(t, e.eng, c.ID, nil, 40)
}
