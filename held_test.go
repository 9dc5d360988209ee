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
	"github.com/hongbao/hongbao/split"
)

// TestHeld: Held answers the packet a grab granted, as Already, before and
// after the campaign closes; nothing for a user who holds none; not found
// for a campaign that is missing or still loading. It never grants.
func TestHeld(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 300, Count: 3, Split: split.Fixed})

	_, err := eng.Held(ctx, c.ID, "alice")
	require.ErrorIs(t, err, hongbao.ErrNoGrant)
	require.NotErrorIs(t, err, hongbao.ErrCampaignNotFound)
	require.Equal(t, "hongbao: held "+c.ID+": no packet held", err.Error())

	g, err := eng.Grab(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	h, err := eng.Held(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Grant{Campaign: c.ID, User: "alice", Outcome: hongbao.Already, Seq: g.Seq, Cents: 100}, h)

	_, err = eng.Held(ctx, c.ID, "bob")
	require.ErrorIs(t, err, hongbao.ErrNoGrant)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.GrantedCount, "Held grants nothing")

	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	h, err = eng.Held(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, g.Seq, h.Seq, "a closed campaign still shows the packet")

	_, err = eng.Held(ctx, testenv.UniqueID(t), "alice")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)

	loading := testenv.UniqueID(t)
	_, err = redisstore.New(r.Client).Begin(ctx, redisstore.Default.CampaignKeys(loading), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 100, Count: 1}})
	require.NoError(t, err)
	_, err = eng.Held(ctx, loading, "alice")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "a loading campaign is not found")

	_, err = eng.Held(ctx, c.ID, "a b")
	require.ErrorIs(t, err, hongbao.ErrInvalidID)
	_, err = eng.Held(ctx, "a{b}", "alice")
	require.ErrorIs(t, err, hongbao.ErrInvalidID)

	// A claim that is not "<seq>:<cents>" is corruption, not a packet.
	k := redisstore.Default.CampaignKeys(c.ID)
	require.NoError(t, r.Client.Do(ctx, r.Client.B().Hset().Key(k.Claims).FieldValue().FieldValue("mallory", "x").Build()).Error())
	_, err = eng.Held(ctx, c.ID, "mallory")
	require.ErrorIs(t, err, redisstore.ErrCorrupt)
}

// TestCampaignsAndServerFacts: Create registers a campaign in the list of
// live ones, by close time; Persistence and Ping read the engine's Redis;
// CountRequests keeps one count per second shared by every engine on it.
func TestCampaignsAndServerFacts(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "always"}) // its own registry
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()

	ids, err := eng.Campaigns(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)
	late := create(t, eng, hongbao.Spec{ID: "late", Total: 100, Count: 1, ClosesAt: time.Now().Add(2 * time.Hour)})
	early := create(t, eng, hongbao.Spec{ID: "early", Total: 100, Count: 1, ClosesAt: time.Now().Add(time.Hour)})
	ids, err = eng.Campaigns(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{early.ID, late.ID}, ids, "by close time")

	p, err := eng.Persistence(ctx)
	require.NoError(t, err)
	require.Equal(t, "always", p)
	require.NoError(t, eng.Ping(ctx))

	other, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	sec := time.Now().Unix()
	n, err := eng.CountRequests(ctx, sec, 20)
	require.NoError(t, err)
	require.EqualValues(t, 20, n)
	n, err = other.CountRequests(ctx, sec, 5)
	require.NoError(t, err)
	require.EqualValues(t, 25, n, "one count per second, shared")
	n, err = eng.CountRequests(ctx, sec+1, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "a new second starts from zero")
	ttl, err := r.Client.Do(ctx, r.Client.B().Ttl().Key(redisstore.Default.GlobalRateKey(sec)).Build()).AsInt64()
	require.NoError(t, err)
	require.True(t, ttl > 0 && ttl <= 5, "the count expires: ttl %d", ttl)

	require.NoError(t, r.Server.Stop())
	require.Error(t, eng.Ping(ctx))
	_, err = eng.Persistence(ctx)
	require.Error(t, err)
}
