package settle

import (
	"context"
	"errors"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// Reap expires the reservations whose hold has passed in every discount
// campaign this worker owns (see owner.go), on every shard, returning
// their amounts (disc_reap.lua), and says how many. Expiring twice
// changes nothing the second time, so a reap that stops half way is
// finished by the next. A scheduler runs it every ReapEvery while it
// holds the lease (with parts, part 0), wherever settlement runs: in
// serve and in hongbao settle alike. A campaign that vanished or is still
// loading is skipped.
func (w *Worker) Reap(ctx context.Context) (int, error) {
	dids, err := w.store.Campaigns(ctx, redisstore.Discount)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, id := range w.only(dids) {
		n, err := w.reap(ctx, id)
		total += n
		w.tell(&w.reaped, hongbao.SettleReaped, id, int64(n), nil)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// reap expires the reservations past their hold of discount campaign id
// when this worker owns it.
func (w *Worker) reap(ctx context.Context, id string) (int, error) {
	v, err := w.store.ReadDiscount(ctx, id)
	if errors.Is(err, redisstore.ErrNoCampaign) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if st := v.Root().Meta["state"]; st == "loading" || st == "settled" {
		return 0, nil
	}
	if mine, _, _, err := w.mine(ctx, id, v.Root(), v.Shards[0].Keys()); err != nil || !mine {
		return 0, err
	}
	total := 0
	for _, k := range v.Shards {
		for more := true; more; {
			var n int
			n, more, err = w.store.Reap(ctx, k, redisstore.MaxReap)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}
