package hongbao_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestCampaignIDRetired: once a red packet campaign is settled (refunded
// in the ledger) and its keys expired, a create of the same id through
// the library is refused when the engine has the ledger (Config.Packets):
// ErrCampaignRetired, with nothing written and nothing registered; the
// same when a load begun after the keys expired is all Redis holds of
// it. Before, the create went live again (recording the same packets is a
// no-op) and its grants settled into the first campaign's refunded
// escrow: only httpapi's own check stopped it.
func TestCampaignIDRetired(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		r := testenv.SharedRedis(t)
		led := sqliteLedger(t)
		eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led})
		require.NoError(t, err)
		ctx := context.Background()
		spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10, Shards: shards}
		c, err := eng.Create(ctx, spec)
		require.NoError(t, err)
		require.NoError(t, led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}))
		g, err := eng.Grab(ctx, spec.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		_, err = eng.CloseCampaign(ctx, spec.ID)
		require.NoError(t, err)
		_, err = eng.Create(ctx, spec)
		require.ErrorIs(t, err, hongbao.ErrCampaignExists, "still in Redis: a replay")

		w, err := settle.New(settle.Config{Redis: r.Client, Ledger: led, Consumer: "retired", Only: []string{spec.ID},
			Retention: time.Millisecond, Logger: quiet()})
		require.NoError(t, err)
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = w.Drain(dctx)
		cancel()
		require.NoError(t, err)
		tot, err := led.Totals(ctx, spec.ID)
		require.NoError(t, err)
		require.True(t, tot.RefundDone)
		require.Eventually(t, func() bool {
			_, err := eng.Status(ctx, spec.ID)
			return err != nil
		}, 10*time.Second, 5*time.Millisecond, "the keys expire after the retention")
		_, err = eng.Status(ctx, spec.ID)
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)

		_, err = eng.Create(ctx, spec)
		require.ErrorIs(t, err, hongbao.ErrCampaignRetired, "shards=%d", shards)
		root := redisstore.Default.CampaignKeys(spec.ID)
		n, err := r.Client.Do(ctx, r.Client.B().Exists().Key(root.Meta).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "nothing written")
		_, ok := registry(t, r.Client, false, spec.ID)
		require.False(t, ok, "nothing registered")

		// A load begun, as by a create whose check ran before the keys
		// expired: the create finds it and refuses all the same.
		_, err = redisstore.New(r.Client).Begin(ctx, root, redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 1000}})
		require.NoError(t, err)
		_, err = eng.Create(ctx, spec)
		require.ErrorIs(t, err, hongbao.ErrCampaignRetired)
		_, err = eng.Grab(ctx, spec.ID, "bob")
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "never live again")
		_, ok = registry(t, r.Client, false, spec.ID)
		require.False(t, ok, "nothing registered")
		tot2, err := led.Totals(ctx, spec.ID)
		require.NoError(t, err)
		require.Equal(t, tot, tot2, "the ledger is as the settlement left it")
	}
}

// TestCampaignCreateRetriedBeforeLive: a create that recorded its packets
// and terms in the ledger, and was funded there, but never went live in
// this Redis (here: it went live in another Redis, which is as much as
// this one knows) is run again with the same id: the ledger shows it
// funded, not refunded, so it is not retired; the retry reuses the
// recorded seed and goes live.
func TestCampaignCreateRetriedBeforeLive(t *testing.T) {
	t.Parallel()
	led := sqliteLedger(t)
	ctx := context.Background()
	other := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	first, err := hongbao.New(hongbao.Config{Redis: other.Client, Packets: led})
	require.NoError(t, err)
	spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10}
	c, err := first.Create(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}))

	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led})
	require.NoError(t, err)
	again, err := eng.Create(ctx, spec)
	require.NoError(t, err, "funded but never settled: not retired")
	require.Equal(t, c.Seed, again.Seed, "the recorded seed")
	g, err := eng.Grab(ctx, spec.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
}

// TestCampaignLostNotCreatedAgain: Redis lost a live campaign (here a
// FLUSHALL) whose grants the ledger holds, settled (1) or whose blocks it
// records as opened, the grants not settled yet (2). A create of the same
// id through the library must be refused: with the recorded seed it
// loads the same packets, every one back in the pool, and a packet a
// user was told GRANTED (and, in 1, paid) is granted to a second user.
// The way back is a rebuild, which places the settled grants and
// quarantines what may have been popped.
func TestCampaignLostNotCreatedAgain(t *testing.T) {
	t.Parallel()
	for _, settled := range []bool{true, false} {
		r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
		led := sqliteLedger(t)
		eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led})
		require.NoError(t, err)
		ctx := context.Background()
		spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 200, Count: 2}
		_, err = eng.Create(ctx, spec)
		require.NoError(t, err)
		g, err := eng.Grab(ctx, spec.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		if settled {
			w, err := settle.New(settle.Config{Redis: r.Client, Ledger: led, Consumer: "lost", Only: []string{spec.ID}, Logger: quiet()})
			require.NoError(t, err)
			_, err = w.Pass(ctx)
			require.NoError(t, err)
			tot, err := led.Totals(ctx, spec.ID)
			require.NoError(t, err)
			require.EqualValues(t, 1, tot.GrantCount, "alice's grant is settled")
			require.False(t, tot.RefundDone, "still open")
		}
		require.NoError(t, r.Client.Do(ctx, r.Client.B().Flushall().Build()).Error())

		_, err = eng.Create(ctx, spec)
		require.ErrorIs(t, err, hongbao.ErrCampaignRetired, "settled=%v: the ledger knows it was live", settled)
		b, err := eng.Grab(ctx, spec.ID, "bob")
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "settled=%v: alice's packet %d is not granted again (bob: %+v)", settled, g.Seq, b)
		_, ok := registry(t, r.Client, false, spec.ID)
		require.False(t, ok, "nothing registered")
	}
}
