package settle

import (
	"context"
	"time"
)

// rollUpper is a Sink that keeps user balances rolled up per campaign:
// ledger.Ledger. A Sink that is not one (a webhook) has no roll-up.
type rollUpper interface {
	RollUp(ctx context.Context, campaign string) (bool, error)
	PendingRollUps(ctx context.Context, limit int) ([]string, error)
}

// rollUpBatch is how many pending campaigns one ledger read lists.
const rollUpBatch = 16

// RollUps rolls up every campaign the ledger holds refunded and not
// rolled up yet (ledger.Ledger.RollUp), one transaction each, and returns
// how many this call rolled up. The refund leaves the users' balances to
// it, so that settling is not held up by a write of one row per user:
// until a campaign is rolled up, Balance reads its entries from the
// journal, so nothing waits for it but the ledger's housekeeping. A
// started Worker does it in the background (after each refund, and at
// start for those a crash left behind); Drain does not, so a caller of
// Drain calls RollUps after it. It rolls up every pending campaign,
// Config.Only or not: any refunded campaign is safe to roll up, and one
// left behind would stay in every Balance read. A Sink that is not a
// ledger has none: 0.
func (w *Worker) RollUps(ctx context.Context) (int, error) {
	r, ok := w.sink.(rollUpper)
	if !ok {
		return 0, nil
	}
	total := 0
	for {
		ids, err := r.PendingRollUps(ctx, rollUpBatch)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		n := 0
		for _, id := range ids {
			start := time.Now()
			done, err := r.RollUp(ctx, id)
			if err != nil {
				return total, err
			}
			if done {
				n++
				w.rolledUp.Add(1)
				w.log.Info("campaign rolled up", "campaign", id, "seconds", time.Since(start).Seconds())
			}
		}
		total += n
		// Another process rolled these up first; the next read would
		// find the ones after them, unless it raced on all of them again.
		if n == 0 && len(ids) < rollUpBatch {
			return total, nil
		}
	}
}

// wakeRollUp tells the background roll-up that a campaign was refunded.
// It never blocks.
func (w *Worker) wakeRollUp() {
	select {
	case w.rollWake <- struct{}{}:
	default:
	}
}

// rollUpLoop runs RollUps off the passes' path, so that a refund's
// roll-up never delays the grants of other campaigns: once at start
// (a process that stopped between a refund and its roll-up left the
// campaign pending), after every refund, and after a backoff while the
// ledger fails. A roll-up cut short by Stop commits nothing; the next
// start finds the campaign pending and rolls it up.
func (w *Worker) rollUpLoop(ctx context.Context, halt <-chan struct{}) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		var retry <-chan time.Time
		if _, err := w.RollUps(ctx); err != nil && ctx.Err() == nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), w.cfg.MaxBackoff)
			w.log.Warn("roll-up failed; retrying", "err", err, "backoff", backoff)
			retry = time.After(backoff)
		} else {
			backoff = 0
		}
		select {
		case <-ctx.Done():
		case <-halt:
			return
		case <-w.rollWake:
		case <-retry:
		}
	}
}
