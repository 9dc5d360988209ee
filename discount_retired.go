package hongbao

import (
	"context"
	"errors"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// ErrCampaignRetired: the ledger knows a campaign of this id that Redis
// no longer holds: it was settled and its keys expired after the
// settlement's retention (or, for red packets, Redis lost a campaign the
// ledger shows was live: see Create). A create of that id is refused: a second
// campaign under it would share the first one's ledger entries (its fund,
// its discounts, its refund). Use a new id.
var ErrCampaignRetired = sentinel("campaign settled and retired; use a new id")

// ledgerTotals reads a campaign's totals in the ledger; a ledger.Ledger
// does, and so Config.Packets when it is one.
type ledgerTotals interface {
	Totals(ctx context.Context, campaign string) (ledger.Totals, error)
}

// discountKnown says whether the ledger (Config.Packets, when it reads
// totals) knows discount campaign id: funded or refunded, which the
// settlement worker does only to a campaign that was live. When it does
// and Redis holds no keys of id, the id is retired: ErrCampaignRetired,
// before anything is written. Without such a ledger nothing is known.
func (e *Engine) discountKnown(ctx context.Context, id string) (bool, error) {
	if e.life.closing() {
		return false, opErr("create discount", id, ErrClosed) // no more ledger reads
	}
	l, ok := e.cfg.Packets.(ledgerTotals)
	if !ok {
		return false, nil
	}
	t, err := l.Totals(ctx, ledger.DiscountCampaign(id))
	if err != nil {
		return false, opErr("create discount", id, ledgerErr("read the ledger", err))
	}
	if t.Funded == 0 && !t.RefundDone {
		return false, nil
	}
	_, err = e.store.ReadDiscount(ctx, id)
	switch {
	case errors.Is(err, redisstore.ErrNoCampaign):
		return true, opErr("create discount", id, ErrCampaignRetired)
	case err != nil:
		return true, opErr("create discount", id, mapStoreErr(err))
	}
	return true, nil
}
