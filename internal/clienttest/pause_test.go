package clienttest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client"
)

// TestPauseAndBlockCalls: the brakes of both kinds through the client, on
// the real service.
func TestPauseAndBlockCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)

	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 300, Count: 3, Split: "fixed", Shards: 2})
	require.NoError(t, err)
	st, err := admin.PauseCampaign(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, 2, st.PausedShards)
	g, err := admin.As(userToken(t, "alice")).Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Paused, g.Outcome)
	require.False(t, g.Holds())
	st, err = admin.ResumeCampaign(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)

	ch, err := admin.BlockUsers(ctx, c.ID, "mallory", "trudy")
	require.NoError(t, err)
	require.Equal(t, client.BlockChange{Campaign: c.ID, Added: 2}, *ch)
	g, err = admin.As(userToken(t, "mallory")).Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Blocked, g.Outcome)
	list, err := admin.BlockedUsers(ctx, c.ID)
	require.NoError(t, err)
	require.Len(t, list.Users, 2)
	require.Equal(t, "mallory", list.Users[0].User)
	require.False(t, list.Users[0].Since.IsZero())
	ch, err = admin.UnblockUsers(ctx, c.ID, "mallory")
	require.NoError(t, err)
	require.Equal(t, 1, ch.Removed)
	_, err = admin.BlockUsers(ctx, c.ID)
	require.ErrorIs(t, err, client.ErrInvalidRequest, "no users")
	_, err = admin.PauseCampaign(ctx, "nope")
	require.ErrorIs(t, err, client.ErrNotFound)

	d, err := admin.CreateDiscount(ctx, client.DiscountSpec{BudgetCents: 1000, Quota: 10, MinCents: 100, MaxCents: 100})
	require.NoError(t, err)
	ds, err := admin.PauseDiscount(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, ds.Paused)
	pay := admin.As(paymentKey)
	r, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 500})
	require.NoError(t, err)
	require.Equal(t, client.Paused, r.Outcome)
	ds, err = admin.ResumeDiscount(ctx, d.ID)
	require.NoError(t, err)
	require.False(t, ds.Paused)
	_, err = admin.BlockDiscountUsers(ctx, d.ID, "u2")
	require.NoError(t, err)
	r, err = pay.Reserve(ctx, d.ID, client.Order{UserID: "u2", OrderID: "o1", OrderAmountCents: 500})
	require.NoError(t, err)
	require.Equal(t, client.Blocked, r.Outcome)
	dl, err := admin.DiscountBlockedUsers(ctx, d.ID)
	require.NoError(t, err)
	require.Len(t, dl.Users, 1)
	_, err = admin.UnblockDiscountUsers(ctx, d.ID, "u2")
	require.NoError(t, err)
	ds, err = admin.Discount(ctx, d.ID)
	require.NoError(t, err)
	require.Zero(t, ds.BlockedUsers)
}
