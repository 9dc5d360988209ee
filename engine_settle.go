package hongbao

import "sync/atomic"

// settleHooks are what a settlement scheduler tells the engine: which
// campaigns are too far behind to take more grabs, and whom to wake when
// a grant is made. Both are read on the grab path with one atomic load
// each and never cost a Redis call.
type settleHooks struct {
	busy    atomic.Pointer[map[string]struct{}]
	granted atomic.Pointer[func()]
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

// OnGranted sets f to be called after each grab that granted a packet
// (nil: none), replacing an earlier f. f runs on the grab's goroutine and
// must not block: a settlement worker's Wake is one, so that the grant is
// settled now rather than at the worker's next idle poll.
func (e *Engine) OnGranted(f func()) {
	if f == nil {
		e.hooks.granted.Store(nil)
		return
	}
	e.hooks.granted.Store(&f)
}

// granted calls the OnGranted function, if any.
func (e *Engine) granted() {
	if f := e.hooks.granted.Load(); f != nil {
		(*f)()
	}
}
