package hongbao

import "sync/atomic"

// settleHooks are what a settlement scheduler tells the engine: which
// campaigns are too far behind to take more grabs. It is read on the grab
// path with one atomic load and never costs a Redis call. (Whom to wake
// when a grant is made is an Observer: scheduler.Publisher.)
type settleHooks struct {
	busy atomic.Pointer[map[string]struct{}]
}

// SetSettleBusy makes grabs of the campaigns ids answer ErrBusy, before
// they are queued, until the next call replaces the set (nil or empty:
// none). A settlement scheduler with a backlog bound calls it when it reads
// the backlog (scheduler.Config.MaxBacklog): a campaign whose unsettled
// grants pass the bound stops granting until settlement catches up, so
// grants in Redis never run further ahead of the ledger than the operator
// allows. ErrBusy is safe to retry. Discount calls are not affected.
func (e *Engine) SetSettleBusy(ids []string) {
	if len(ids) == 0 {
		e.hooks.busy.Store(nil)
		return
	}
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	e.hooks.busy.Store(&m)
}

// settleBusy says whether grabs of campaign id answer ErrBusy.
func (e *Engine) settleBusy(id string) bool {
	m := e.hooks.busy.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[id]
	return ok
}
