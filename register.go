package hongbao

import (
	"context"
	"errors"
	"time"
)

// The registries (hb:campaigns, hb:discounts) are what the scheduler
// walks: settlement, the refund, close-on-time and the discount reaper
// see only registered campaigns. A campaign that can be grabbed and is not
// registered is money nobody settles. The registry is another slot than
// the campaign's keys, so no campaign script can write it; the engine
// writes it on both sides of the step that makes a campaign live:
//
//   - before the first activation, with the close time the activation
//     will use when it is known, else a provisional one: a create that
//     stops after activating leaves the campaign registered, whatever step
//     failed;
//   - after the activation, with the close time it resolved;
//   - on every create that finds the campaign past loading (a replay, an
//     ExistsError): a create whose registration was lost by an earlier
//     version or an operator's ZREM is registered again.
//
// A create that stops before activation leaves a registered campaign in
// loading: the settlement worker, the reaper and the readers all skip a
// loading campaign, and a create run again with the same id goes on. One
// whose activation refuses its window (a close time already past) takes
// the campaign out again (dropRefused).

// register adds campaign id of kind k to its registry with score
// closesAt. ZADD: registering again only moves the score.
func (e *Engine) register(ctx context.Context, op, id string, k *kind, closesAt int64) error {
	if err := e.store.Register(ctx, k.store, id, closesAt); err != nil {
		return opErr(op, id, err)
	}
	return nil
}

// provisionalClose is the score a campaign is registered with before its
// activation: the close time given, else the open time given (or now, by
// this process's clock) plus the default window, as activation resolves
// it. The score only orders the registry; activation's is written after.
func (e *Engine) provisionalClose(opens, closes int64) int64 {
	if closes > 0 {
		return closes
	}
	if opens == 0 {
		opens = time.Now().UnixMilli()
	}
	return opens + e.cfg.DefaultWindow.Milliseconds()
}

// registerExisting registers again the campaign a create found past
// loading, with the close time it has, and returns err (the
// *ExistsError) when that is done. A settled campaign left the registry
// on purpose and stays out; one a rebuild holds (loading, with no close
// time yet) is registered by the rebuild. An error other than an
// *ExistsError is returned as it is. If the registration fails, that
// failure is the answer: a replay must not report success for a campaign
// the scheduler may not know.
func (e *Engine) registerExisting(ctx context.Context, op string, k *kind, err error) error {
	var exists *ExistsError
	if !errors.As(err, &exists) || exists.State == StateSettled {
		return err
	}
	snap, rerr := e.store.Status(ctx, e.root(k, exists.ID))
	if rerr != nil {
		return opErr(op, exists.ID, mapStoreErr(rerr))
	}
	closes := snap.Int("closes_at")
	if closes <= 0 {
		return err
	}
	if rerr := e.register(ctx, op, exists.ID, k, closes); rerr != nil {
		return rerr
	}
	return err
}

// dropRefused takes campaign id out of its registry after its activation
// was refused for its window (HBWINDOW, raised before any write: nothing
// went live under this load), so that a create with a close time already
// past leaves nothing registered. A create of the same id that made the
// campaign live meanwhile is registered again at once. Should a step fail,
// the campaign stays registered in loading, which every walker skips.
func (e *Engine) dropRefused(ctx context.Context, id string, k *kind) {
	if err := e.store.Unregister(ctx, k.store, id, nil, 0); err != nil {
		return
	}
	snap, err := e.store.Status(ctx, e.root(k, id))
	if err != nil || State(snap.Meta["state"]) == StateLoading || snap.Int("closes_at") <= 0 {
		return
	}
	_ = e.register(ctx, "create", id, k, snap.Int("closes_at"))
}
