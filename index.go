package hongbao

import (
	"context"
)

// CampaignsPage lists at most limit of the registered (not yet settled)
// red packet campaigns from offset, those that close first first, and
// how many there are in all. Unlike Campaigns it reads no more of the
// index than the page.
func (e *Engine) CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	return e.indexPage(ctx, kindRedPacket, offset, limit)
}

// CampaignsPage is CampaignsPage for discount campaigns.
func (ds Discounts) CampaignsPage(ctx context.Context, offset, limit int) ([]string, int, error) {
	return ds.e.indexPage(ctx, kindDiscount, offset, limit)
}

func (e *Engine) indexPage(ctx context.Context, k *kind, offset, limit int) ([]string, int, error) {
	ids, n, err := e.store.IndexPage(ctx, e.store.NS().Index(k.store), offset, limit)
	if err != nil {
		return nil, 0, plainStoreErr(err)
	}
	return ids, int(n), nil
}
