package hongbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// settledInLedger says whether the ledger (Config.Packets, when it reads
// totals) shows red packet campaign id refunded: settled, which the
// settlement worker does only to a campaign that was live and closed.
// When it does and Redis holds no keys of id (they expired after the
// settlement's retention), the id is retired: ErrCampaignRetired, before
// anything is written. When Redis still holds a meta, the create's begin
// decides: a campaign past loading (or frozen by a rebuild) is an
// *ExistsError as ever, a load nobody made live is refused
// (createOne, createSharded). A campaign the ledger shows funded but not
// refunded is not retired: a create retried before the campaign went live
// (its packets and terms recorded, perhaps funded) reuses the recorded
// seed and goes on (recordedSeed). Without such a ledger nothing is known.
func (e *Engine) settledInLedger(ctx context.Context, id string) (bool, error) {
	l, ok := e.cfg.Packets.(ledgerTotals)
	if !ok || id == "" {
		return false, nil
	}
	t, err := l.Totals(ctx, id)
	if err != nil {
		return false, opErr("create", id, fmt.Errorf("read the ledger: %w", err))
	}
	if !t.RefundDone {
		return false, nil
	}
	_, err = e.store.Status(ctx, redisstore.CampaignKeys(id))
	switch {
	case errors.Is(err, redisstore.ErrNoCampaign):
		return true, opErr("create", id, ErrCampaignRetired)
	case err != nil:
		return true, opErr("create", id, mapStoreErr(err))
	}
	return true, nil
}
