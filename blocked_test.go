package hongbao_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// TestBlockedPage: pages of any size, one after the other, list every
// blocked user exactly once, shard by shard, with the total; a campaign
// with more users on a shard than Redis keeps in a small hash (scanned
// in several calls) included; offsets past the end answer an empty page.
func TestBlockedPage(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 10000, Count: 100, Shards: shards})
		var users []string
		for i := 0; i < 1500; i++ {
			users = append(users, fmt.Sprintf("user-%04d", i))
		}
		_, err := eng.Block(ctx, c.ID, users[:1000])
		require.NoError(t, err)
		_, err = eng.Block(ctx, c.ID, users[1000:])
		require.NoError(t, err)

		for _, limit := range []int{1000, 7} {
			seen := map[string]int{}
			for offset := 0; ; offset += limit {
				page, total, err := eng.BlockedPage(ctx, c.ID, offset, limit)
				require.NoError(t, err)
				require.Equal(t, 1500, total)
				require.Equal(t, min(limit, max(1500-offset, 0)), len(page), "offset %d, limit %d, %d shards", offset, limit, shards)
				for _, u := range page {
					seen[u.User]++
					require.False(t, u.Since.IsZero())
				}
				if len(page) == 0 {
					break
				}
			}
			require.Len(t, seen, 1500, "%d shards, limit %d", shards, limit)
			for u, n := range seen {
				require.Equal(t, 1, n, "%s listed %d times", u, n)
			}
		}
	}

	// A discount campaign's, and the refusals.
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 10000, Quota: 10, Shards: 2})
	_, err := eng.Discounts().Block(ctx, d.ID, []string{"ann", "bob", "cy"})
	require.NoError(t, err)
	page, total, err := eng.Discounts().BlockedPage(ctx, d.ID, 1, 5)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Len(t, page, 2)
	all, _, err := eng.Discounts().BlockedPage(ctx, d.ID, 0, hongbao.MaxBlockedPage)
	require.NoError(t, err)
	require.Len(t, all, 3)
	_, _, err = eng.BlockedPage(ctx, d.ID, 0, 10)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "a discount campaign is no red packet campaign")
	_, _, err = eng.Discounts().BlockedPage(ctx, "no-such-discount", 0, 10)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	for _, bad := range [][2]int{{-1, 10}, {0, 0}, {0, hongbao.MaxBlockedPage + 1}} {
		_, _, err = eng.Discounts().BlockedPage(ctx, d.ID, bad[0], bad[1])
		require.Error(t, err, "offset %d limit %d", bad[0], bad[1])
	}
}
