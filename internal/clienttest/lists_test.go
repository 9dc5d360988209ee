package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestListCalls: the campaign and discount lists a page at a time, the
// creates from a body as the API takes it (replayed under the same key),
// and a blocklist longer than a page, read whole by BlockedUsers.
func TestListCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)

	key := testenv.UniqueID(t)
	c, err := admin.CreateCampaignJSON(ctx, json.RawMessage(`{"total":"3.00","count":3,"shards":2}`), key)
	require.NoError(t, err)
	require.EqualValues(t, 300, c.TotalCents)
	require.Equal(t, 2, c.Shards)
	again, err := admin.CreateCampaignJSON(ctx, json.RawMessage(`{"total":"3.00","count":3,"shards":2}`), key)
	require.NoError(t, err)
	require.Equal(t, c.ID, again.ID, "the same key replays the create")
	_, err = admin.CreateCampaignJSON(ctx, json.RawMessage(`{"total":"3.00"}`), "")
	require.ErrorIs(t, err, client.ErrInvalidRequest)
	d, err := admin.CreateDiscountJSON(ctx, json.RawMessage(`{"budget":"5.00","quota":5,"per_user_count":2}`), key)
	require.NoError(t, err)
	require.EqualValues(t, 500, d.BudgetCents)
	require.Equal(t, 2, d.PerUserCount)

	// The lists hold every test's campaigns of the shared Redis: walk
	// them a small page at a time until ours shows.
	found := false
	for p := (client.Page{Limit: 2}); !found; p.Offset += p.Limit {
		l, err := admin.CampaignsPage(ctx, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(l.Campaigns), 2)
		require.Positive(t, l.Total)
		for _, x := range l.Campaigns {
			found = found || x.ID == c.ID
		}
		if !l.More {
			break
		}
	}
	require.True(t, found, "the campaign in the pages")
	found = false
	for p := (client.Page{Limit: 3}); !found; p.Offset += p.Limit {
		l, err := admin.DiscountsPage(ctx, p)
		require.NoError(t, err)
		for _, x := range l.Discounts {
			if x.ID == d.ID {
				found = true
				require.EqualValues(t, 500, x.RemainingCents)
				require.Equal(t, 5, x.RemainingCount)
			}
		}
		if !l.More {
			break
		}
	}
	require.True(t, found, "the discount campaign in the pages")
	_, err = admin.CampaignsPage(ctx, client.Page{Limit: client.MaxListPage + 1})
	require.ErrorIs(t, err, client.ErrInvalidRequest)

	var users []string
	for i := 0; i < 1200; i++ {
		users = append(users, fmt.Sprintf("u%04d", i))
	}
	_, err = admin.BlockUsers(ctx, c.ID, users[:1000]...)
	require.NoError(t, err)
	_, err = admin.BlockUsers(ctx, c.ID, users[1000:]...)
	require.NoError(t, err)
	all, err := admin.BlockedUsers(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, 1200, all.Total)
	require.Len(t, all.Users, 1200)
	for i, u := range all.Users {
		require.Equal(t, users[i], u.User, "every user once, by user id")
	}
	last, err := admin.BlockedUsersPage(ctx, c.ID, client.Page{Offset: 1000})
	require.NoError(t, err)
	require.Len(t, last.Users, 200)
	require.Equal(t, 1200, last.Total)
	require.False(t, last.More)
	first, err := admin.BlockedUsersPage(ctx, c.ID, client.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, first.Users, 10)
	require.True(t, first.More)
	dl, err := admin.DiscountBlockedUsersPage(ctx, d.ID, client.Page{})
	require.NoError(t, err)
	require.Zero(t, dl.Total)
	require.Empty(t, dl.Users)
}

// TestPageLimits: the client's page sizes are openapi.json's.
func TestPageLimits(t *testing.T) {
	t.Parallel()
	doc, err := openapitest.Doc()
	require.NoError(t, err)
	for name, want := range map[string]int{"ListLimit": client.MaxListPage, "BlockedLimit": client.MaxBlockedPage} {
		p := doc.Components.Parameters[name]
		require.NotNil(t, p, name)
		s := p.Value.Schema.Value
		require.NotNil(t, s.Max, name)
		require.EqualValues(t, want, *s.Max, name)
		require.EqualValues(t, want, s.Default, name)
	}
}
