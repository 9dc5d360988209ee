package settle

import (
	"context"
	"time"

	"github.com/hongbao/hongbao/ledger"
)

// purgeBatch is how many campaigns one sweep's ledger read lists.
const purgeBatch = 16

// purgeEvery is the pause between two sweeps of a started worker: the
// retention is counted in days, so an hour late is nothing.
const purgeEvery = time.Hour

// PurgeDrawData deletes the fairness draw data (salts and holder key) of
// every campaign whose refund is older than Config.DrawDataRetention at
// now, and returns how many campaigns this call purged
// (ledger.Committer.PurgeDrawData). The commitment stays: its root,
// count, total and published body, so that what was promised can still
// be shown; the draw log and the proofs answer that they are past their
// retention. It is idempotent, and several processes may run it: a
// campaign purged already is not listed again. A started Worker sweeps at
// start and then every hour. A Sink that keeps no commitments, or a
// negative retention, purges nothing: 0.
func (w *Worker) PurgeDrawData(ctx context.Context, now time.Time) (int, error) {
	cm, ok := w.sink.(ledger.Committer)
	if !ok || w.cfg.DrawDataRetention < 0 {
		return 0, nil
	}
	before := now.Add(-w.cfg.DrawDataRetention)
	total := 0
	for {
		ids, err := cm.PurgeDrawData(ctx, before, purgeBatch)
		total += len(ids)
		for _, id := range ids {
			w.log.Info("fairness draw data purged after its retention", "campaign", id, "retention", w.cfg.DrawDataRetention)
		}
		// Until a page purges nothing: another sweeper may have taken part
		// of a full page, which says nothing of the pages after it.
		if err != nil || len(ids) == 0 {
			return total, err
		}
	}
}

// purgeLoop runs PurgeDrawData off the passes' path: at start, then
// every purgeEvery. A sweep that fails is tried again at the next.
func (w *Worker) purgeLoop(ctx context.Context, halt <-chan struct{}) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for ctx.Err() == nil {
		if _, err := w.PurgeDrawData(ctx, time.Now()); err != nil && ctx.Err() == nil {
			w.log.Warn("draw data sweep failed; trying again in an hour", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-halt:
			return
		case <-t.C:
		}
	}
}
