package hongbao

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Creates of the same campaign at once. Replicas of a host's service (or
// several serve processes) may all create the campaign a request names,
// at the same moment: exactly one of them loads it, and every other one
// answers ErrCampaignExists once it is live, as a replay would.
//
// The campaign's root records the load that holds it and until when (by
// the Redis clock): begin.lua gives a new load the root only when no
// other load holds it, and the loader renews its hold while it works
// (each chunk of the pool it loads, and a keeper between the other steps,
// every third of Config.LoadHold). A create whose begin finds the root
// held waits (awaitLoad), polling the root's status, until the campaign
// is live (ErrCampaignExists), or the hold lapsed, when it starts over:
// its begin then takes the load over from a loader that died or stalled,
// as a create run again after a crash always did. A create that fails for
// any other reason gives its hold up at once (giveUp), so that its retry
// need not wait for it to lapse.
//
// A sharded campaign's other shards are begun with the epoch the root's
// begin drew, and refuse an older one: once a load lost the root (its
// hold lapsed and another create took it over), none of its writes can
// reach a shard the newer load began (load.lua and activate.lua act only
// for the token that began the shard), and the root goes live last, under
// the load that holds it, so a live campaign's shards are all of that
// load. A loader that finds its load taken over (HBSTALE, or a shard begun
// by a newer load) waits as any other create does.
//
// Stopped between two steps: before the root's begin, nothing was
// written; after it, the campaign is loading under this create's hold,
// which lapses within Config.LoadHold, and the next create of the id takes
// it over and starts the load again (recordedSeed gives it the packets
// this one recorded, if it recorded them). Only the root's activation
// makes the campaign live, and it checks the load's token, so a load
// taken over never goes live.
//
// What a lease cannot promise: a loader stalled longer than its hold (a
// process paused, a network that held its calls) between a renewal and a
// ledger write may record after another create took the load over. The
// ledger refuses other packets (the recorded seed is used by every create
// of the id); terms it records are overwritten by the create that goes
// live, unless the stalled one writes last, which then leaves the
// ledger's window of the campaign off by that much.

// DefaultLoadHold is Config.LoadHold's default.
const DefaultLoadHold = 5 * time.Second

// errLost cancels a loader's steps: another create took its load over.
var errLost = errors.New("another create took the load over")

// heldError says that another create holds the load of campaign id: wait,
// then begin again.
type heldError struct{ id string }

func (e *heldError) Error() string { return "campaign " + e.id + ": another create is loading it" }

// hold is a create's hold on the campaign whose root it began: a keeper
// renews it until the create stops it.
type hold struct {
	ctx    context.Context // the create's context, cancelled with errLost once the load is lost
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// keep renews the hold of load token on root every third of
// Config.LoadHold until stop; should a renewal find the load taken over,
// it cancels the hold's context with errLost, which stops the create's
// steps in flight (a ledger write among them) at once.
func (e *Engine) keep(ctx context.Context, root redisstore.Keys, token string) *hold {
	h := &hold{done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	go func() {
		defer close(h.done)
		t := time.NewTicker(e.cfg.LoadHold / 3)
		defer t.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
			// A renewal that failed otherwise (Redis slow or away) is
			// tried again at the next tick; the steps fail on their own.
			if err := e.store.Renew(h.ctx, root, token, e.cfg.LoadHold); errors.Is(err, redisstore.ErrStale) {
				h.cancel(errLost)
				return
			}
		}
	}()
	return h
}

// stop ends the keeper, if it still runs, and reports whether the load
// was lost meanwhile. Every create that started a keeper stops it before
// it returns.
func (h *hold) stop() (lost bool) {
	h.cancel(nil) // a no-op when the keeper cancelled first
	<-h.done
	return context.Cause(h.ctx) == errLost
}

// lostErr is the error of a loader's step that failed with err: a
// *heldError when the load was taken over (HBSTALE, or the keeper found
// it so), else err.
func (h *hold) lostErr(id string, err error) error {
	if err != nil && (errors.Is(err, redisstore.ErrStale) || context.Cause(h.ctx) == errLost) {
		return &heldError{id: id}
	}
	return err
}

// giveUp gives up the hold on root of a create that failed (its keeper
// stopped), so that a create of the same id (its retry) may take the load
// over at once. One that fails leaves the hold to lapse.
func (e *Engine) giveUp(h *hold, root redisstore.Keys, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), time.Second)
	defer cancel()
	_ = e.store.Renew(ctx, root, token, 0)
}

// begun turns the root's begin into an error, or nil when the load
// began: an *ExistsError, a *heldError, or the store's error of op.
func begun(op, id string, b redisstore.Begun, err error) error {
	switch {
	case err != nil:
		return opErr(op, id, mapStoreErr(err))
	case b.Held:
		return &heldError{id: id}
	case b.Existing != "":
		return &ExistsError{ID: id, State: State(b.Existing)}
	}
	return nil
}

// shardBegun is begun for a shard other than the root, begun by the load
// that holds the root: a newer load that began it took this one over.
func (h *hold) shardBegun(op, id string, b redisstore.Begun, err error) error {
	if err == nil && b.Held {
		return &heldError{id: id}
	}
	return h.lostErr(id, begun(op, id, b, err))
}

// Polling a held campaign: the first pause, and the longest.
const (
	awaitFirst = 5 * time.Millisecond
	awaitMax   = 250 * time.Millisecond
)

// awaitLoad waits while another create holds the load of the campaign
// whose root is root, polling its status with a growing pause: an
// *ExistsError once the campaign is past loading, nil when the caller
// should begin again (the hold lapsed or was given up, the campaign is
// gone, a rebuild froze it: begin says what to do), ErrCreateInProgress
// when ctx ends first.
func (e *Engine) awaitLoad(ctx context.Context, op, id string, root redisstore.Keys) error {
	pause := awaitFirst
	for {
		snap, err := e.store.Status(ctx, root)
		switch {
		case errors.Is(err, redisstore.ErrNoCampaign):
			return nil
		case err != nil && ctx.Err() != nil:
			return opErr(op, id, &kindError{kind: ErrCreateInProgress, cause: ctx.Err()})
		case err != nil:
			return opErr(op, id, mapStoreErr(err))
		}
		m := snap.Meta
		if state := State(m["state"]); state != StateLoading {
			return &ExistsError{ID: id, State: state}
		}
		until, _ := strconv.ParseInt(m["load_until"], 10, 64)
		if m["rebuild_token"] != "" || until <= snap.Now {
			return nil
		}
		t := time.NewTimer(min(pause, time.Duration(until-snap.Now)*time.Millisecond+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return opErr(op, id, &kindError{kind: ErrCreateInProgress, cause: ctx.Err()})
		case <-t.C:
		}
		pause = min(2*pause, awaitMax)
	}
}
