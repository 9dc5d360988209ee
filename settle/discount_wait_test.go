package settle_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestDiscountRefundWaitsForReplicas: with WaitReplicas 1 the worker
// refunds a closed discount campaign only once a replica holds what the
// refund is computed from, as it does a red packet campaign: while no
// replica follows, a pass refunds nothing (a failover to a replica that
// missed the close would reopen a campaign whose leftover the ledger paid
// back); once a replica follows again, the refund is made, once.
func TestDiscountRefundWaitsForReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	follow(t, replica, primary)
	eng, err := hongbao.New(hongbao.Config{Redis: primary.Client})
	require.NoError(t, err)
	l := openSQLite(t)
	for _, shards := range []int{1, 2} {
		d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t) + strconv.Itoa(shards), Budget: 1_000, Quota: 10,
			Min: 100, Max: 100, Shards: shards})
		require.NoError(t, err)
		_, err = eng.Discounts().Reserve(ctx, d.ID, "ann", "o1", 500)
		require.NoError(t, err)
		_, err = eng.Discounts().Confirm(ctx, d.ID, "ann", "o1")
		require.NoError(t, err)
		// The worker's own client, as a settle process has.
		w, err := settle.New(settle.Config{Redis: testenv.Client(t, primary.Addr), Ledger: l, Consumer: "w", Logger: quiet(),
			Only: []string{d.ID}, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond, Poll: 5 * time.Millisecond})
		require.NoError(t, err)
		_, err = w.Drain(ctx)
		require.NoError(t, err)
		lid := ledger.DiscountCampaign(d.ID)
		tot, err := l.Totals(ctx, lid)
		require.NoError(t, err)
		require.EqualValues(t, 1, tot.GrantCount, "the confirmed discount is settled")

		_, err = eng.Discounts().CloseCampaign(ctx, d.ID)
		require.NoError(t, err)
		require.NoError(t, replica.Client.Do(ctx, replica.Client.B().Replicaof().No().One().Build()).Error())
		_, err = w.Pass(ctx)
		var short *luascript.ShortWaitError
		require.ErrorAs(t, err, &short, "shards %d: a pass with no replica following", shards)
		tot, err = l.Totals(ctx, lid)
		require.NoError(t, err)
		require.False(t, tot.RefundDone, "shards %d: refunded what no replica holds", shards)

		follow(t, replica, primary)
		_, err = w.Drain(ctx)
		require.NoError(t, err)
		tot, err = l.Totals(ctx, lid)
		require.NoError(t, err)
		require.True(t, tot.RefundDone)
		require.EqualValues(t, 900, tot.Refunded)
		st, err := eng.Discounts().Status(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.StateSettled, st.State)
	}
}
