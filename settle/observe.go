package settle

import (
	"sync/atomic"

	"github.com/hongbao/hongbao"
)

// tell counts n in c, a counter of Stats, and tells Config.Observers the
// result of kind on campaign (err: why a pass failed). Nothing is told of
// a count of 0.
func (w *Worker) tell(c *atomic.Int64, kind hongbao.SettleKind, campaign string, n int64, err error) {
	c.Add(n)
	if n == 0 || len(w.cfg.Observers) == 0 {
		return
	}
	ev := hongbao.SettleEvent{Kind: kind, Campaign: campaign, Count: n, Err: err}
	for _, o := range w.cfg.Observers {
		o.ObserveSettle(ev)
	}
}
