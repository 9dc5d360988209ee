package hongbao

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// CampaignsPage lists at most limit of the registered (not yet settled)
// red packet campaigns from offset, those that close first first, and
// how many there are in all. Unlike Campaigns it reads no more of the
// index than the page.
func (e *Engine) CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	ids, n, err := e.store.IndexPage(ctx, redisstore.CampaignsIndex, offset, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("hongbao: %w", err)
	}
	return ids, int(n), nil
}

// DiscountCampaignsPage is CampaignsPage for discount campaigns.
func (e *Engine) DiscountCampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	ids, n, err := e.store.IndexPage(ctx, redisstore.DiscountsIndex, offset, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("hongbao: %w", err)
	}
	return ids, int(n), nil
}
