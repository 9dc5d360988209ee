package hongbao_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestDiscountIDRetired: once a discount campaign is settled and its keys
// expired, a create of the same id is refused when the engine has the
// ledger (Config.Packets): ErrCampaignRetired, with nothing written and
// nothing registered. The same when a refused create's load is all Redis
// holds of it (the keys expired between the check and the load). Before,
// a second campaign was made under the id, sharing the first one's fund,
// discounts and refund in the ledger.
func TestDiscountIDRetired(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	led := sqliteLedger(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led})
	require.NoError(t, err)
	ctx := context.Background()
	spec := hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 600, Quota: 6, Min: 100, Max: 100, Shards: 2}
	_, err = eng.Discounts().Create(ctx, spec)
	require.NoError(t, err)
	_, err = eng.Discounts().Reserve(ctx, spec.ID, "alice", "o", 500)
	require.NoError(t, err)
	_, err = eng.Discounts().Confirm(ctx, spec.ID, "alice", "o")
	require.NoError(t, err)
	_, err = eng.Discounts().CloseCampaign(ctx, spec.ID)
	require.NoError(t, err)
	_, err = eng.Discounts().Create(ctx, spec)
	require.ErrorIs(t, err, hongbao.ErrCampaignExists, "still in Redis: a replay")

	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: led, Consumer: "retired", Only: []string{spec.ID},
		Retention: time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := eng.Discounts().Status(ctx, spec.ID)
		return err != nil
	}, 10*time.Second, 5*time.Millisecond, "the keys expire after the retention")
	_, err = eng.Discounts().Status(ctx, spec.ID)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)

	_, err = eng.Discounts().Create(ctx, spec)
	require.ErrorIs(t, err, hongbao.ErrCampaignRetired)
	root := redisstore.Default.DiscountShardKeys(spec.ID, 2, 0)
	n, err := r.Client.Do(ctx, r.Client.B().Exists().Key(root.Meta).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
	_, ok := registry(t, r.Client, true, spec.ID)
	require.False(t, ok, "nothing registered")

	// A load begun, as by a create whose check ran before the keys
	// expired: the create finds it and refuses all the same.
	_, err = redisstore.New(r.Client).DiscountBegin(ctx, root, redisstore.Loader{Token: "tok"}, redisstore.DiscountMeta{ShardShare: redisstore.ShardShare{Shards: 2}})
	require.NoError(t, err)
	_, err = eng.Discounts().Create(ctx, spec)
	require.ErrorIs(t, err, hongbao.ErrCampaignRetired)
	_, err = eng.Discounts().Reserve(ctx, spec.ID, "bob", "o", 500)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "never live again")
	_, ok = registry(t, r.Client, true, spec.ID)
	require.False(t, ok, "nothing registered")

	// An id the ledger does not know is created as ever.
	other := hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 600, Quota: 6}
	_, err = eng.Discounts().Create(ctx, other)
	require.NoError(t, err, "an id the ledger does not know")
}
