package hongbao

import (
	"context"
)

// CampaignsPage lists at most limit of the registered (not yet settled)
// red packet campaigns from offset, those that close first first, and
// how many there are in all. Unlike Campaigns it reads no more of the
// index than the page.
func (e *Engine) CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	ids, n, err := e.store.IndexPage(ctx, e.store.NS().CampaignsIndex(), offset, limit)
	if err != nil {
		return nil, 0, plainStoreErr(err)
	}
	return ids, int(n), nil
}

// CampaignsPage is CampaignsPage for discount campaigns.
func (ds Discounts) CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	ids, n, err := ds.e.store.IndexPage(ctx, ds.e.store.NS().DiscountsIndex(), offset, limit)
	if err != nil {
		return nil, 0, plainStoreErr(err)
	}
	return ids, int(n), nil
}
