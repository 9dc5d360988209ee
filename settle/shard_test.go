package settle_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestSettleShardedCampaign: a campaign over four shards, with a transfer
// a dead process left half done, settles into one ledger campaign: every
// shard's grants once, the refund once, escrow at zero, reconcile clean,
// and every shard's keys set to expire.
func TestSettleShardedCampaign(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const shards = 4
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 3000, Shards: shards})
	require.NoError(t, err)
	layout := redisstore.Default.Layout(c.ID, shards)
	store := redisstore.New(e.redis.Client)

	w := e.worker(t, e.l, "w1", c.ID)
	require.NoError(t, w.Start(ctx))
	// Users homed on shard 1 only: it borrows from the others.
	var users []string
	for i := 0; len(users) < 1200; i++ {
		if u := "s" + strconv.Itoa(i); hongbao.HomeShard(u, shards) == 1 {
			users = append(users, u)
		}
	}
	var cents int64
	for _, u := range users {
		g, err := e.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		cents += g.Cents
	}
	require.NotZero(t, e.eng.Stats().Transfers)
	// A transfer taken and never applied: the process died after step 1.
	half, err := store.TakeTransfer(ctx, layout[3], 2, 40)
	require.NoError(t, err)
	require.Len(t, half.Packets, 40)

	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.EqualValues(t, len(users), st.GrantedCount)
	require.Equal(t, 1_000_000-cents, st.RefundedCents)
	require.Zero(t, st.InFlight)

	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, len(users), tot.GrantCount)
	require.Equal(t, cents, tot.GrantCents)
	require.Equal(t, 1_000_000-cents, tot.Refunded)
	require.Zero(t, tot.Escrow)

	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	for _, k := range layout {
		ttl, err := e.redis.Client.Do(ctx, e.redis.Client.B().Pttl().Key(k.Meta).Build()).AsInt64()
		require.NoError(t, err)
		require.Greater(t, ttl, int64(0), "shard %s expires", k.Tag)
		n, err := e.redis.Client.Do(ctx, e.redis.Client.B().Hlen().Key(k.Xfers).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "no transfer left in flight")
	}
}
