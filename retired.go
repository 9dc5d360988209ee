package hongbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// settledInLedger says whether the ledger (Config.Packets, when it reads
// totals) shows that red packet campaign id was live: refunded (settled,
// which the settlement worker does only to a campaign that was live and
// closed), or holding grants of it, or blocks of its pools opened (the
// durable pop frontier opens one only for a grab). When it does and Redis
// holds no keys of id, the id is not created again: ErrCampaignRetired,
// before anything is written. Its keys expired after the settlement's
// retention, or Redis lost a live campaign: a create would load the same
// packets (the recorded seed), every one back in the pool, and grant a
// second time a packet the ledger pays to someone, or one a user was told
// GRANTED before the loss; a rebuild is the way back for that one. When
// Redis still holds a meta, the create's begin decides: a campaign past
// loading (or frozen by a rebuild) is an *ExistsError as ever, a load
// nobody made live is refused (createOne, createSharded). A campaign the
// ledger shows funded and nothing more is not retired: a create retried
// before the campaign went live (its packets and terms recorded, perhaps
// funded) reuses the recorded seed and goes on (recordedSeed). Without
// such a ledger nothing is known.
func (e *Engine) settledInLedger(ctx context.Context, id string) (bool, error) {
	l, ok := e.cfg.Packets.(ledgerTotals)
	if !ok || id == "" {
		return false, nil
	}
	t, err := l.Totals(ctx, id)
	if err != nil {
		return false, opErr("create", id, ledgerErr("read the ledger", err))
	}
	live := t.RefundDone || t.GrantCount > 0
	if !live && e.co.blocks != nil {
		if live, err = e.blocksOpened(ctx, id); err != nil {
			return false, opErr("create", id, ledgerErr("read the ledger's blocks", err))
		}
	}
	if !live {
		return false, nil
	}
	_, err = e.store.Status(ctx, e.store.NS().CampaignKeys(id))
	switch {
	case errors.Is(err, redisstore.ErrNoCampaign) && !t.RefundDone:
		return true, opErr("create", id, fmt.Errorf("%w: the ledger shows it live (grants or opened blocks) and Redis "+
			"holds nothing of it: Redis lost it, rebuild it (hongbao rebuild)", ErrCampaignRetired))
	case errors.Is(err, redisstore.ErrNoCampaign):
		return true, opErr("create", id, ErrCampaignRetired)
	case err != nil:
		return true, opErr("create", id, mapStoreErr(err))
	}
	return true, nil
}

// errFound stops a walk at its first find.
var errFound = errors.New("found")

// blocksOpened says whether the ledger records a block of campaign id's
// pools as opened.
func (e *Engine) blocksOpened(ctx context.Context, id string) (bool, error) {
	err := e.co.blocks.Blocks(ctx, id, func(ledger.Block) error { return errFound })
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}
