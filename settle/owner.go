package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Owners. A campaign records, at create, the identity of the ledger or
// sink it settles into (hongbao.Config.Owner, the root's "owner" field).
// A worker settles, closes, refunds, retires and reaps only the campaigns
// it owns: those whose owner is its own identity (Config.Owner). Another
// deployment's campaign in the same namespace (a leftover copy, staging
// beside production) is foreign: it is counted (Stats.Foreign), logged
// once, and never touched, so its money is never paid into this ledger
// nor its refund taken from it; the ledger refuses such a write too
// (ledger.ErrForeign), since every write carries the campaign's owner
// (ledger.WithOwner). A campaign that records no owner (created before
// owners were, or by an engine that knows none) is claimed by the first
// worker with an identity that settles it, in one compare-and-set in
// Redis (owner.lua): two workers never both claim one.

// identified is a sink that names what it settles into: ledger.Ledger and
// webhook.Sink are.
type identified interface {
	Identity(ctx context.Context) (string, error)
}

// Owner is the identity the worker settles for: Config.Owner, else the
// Identity of the ledger or sink (read once, then kept), else "" (the
// worker then settles only campaigns that record no owner, and claims
// none).
func (w *Worker) Owner(ctx context.Context) (string, error) {
	if w.cfg.Owner != "" {
		return w.cfg.Owner, nil
	}
	if o := w.ownerID.Load(); o != nil {
		return *o, nil
	}
	o := ""
	if id, ok := w.sink.(identified); ok {
		var err error
		if o, err = id.Identity(ctx); err != nil {
			return "", fmt.Errorf("settle: read the sink's identity: %w", err)
		}
	}
	if o == "" {
		w.log.Warn("the sink names no identity and Config.Owner is empty: this worker settles only campaigns that record no owner, and claims none")
	}
	w.ownerID.Store(&o)
	return o, nil
}

// own says whether this worker settles campaign id, whose root is read
// as root (its keys rk): yes when the campaign records this worker's
// identity, or records none and this worker claims it (owner.lua) or has
// no identity either. On a claim it writes the owner into root.Meta, so
// that the writes prepared from root carry it. A foreign campaign is
// counted and logged once.
func (w *Worker) own(ctx context.Context, id string, root redisstore.Snapshot, rk redisstore.Keys) (bool, error) {
	mine, owner, me, err := w.mine(ctx, id, root, rk)
	if err != nil || mine {
		return mine, err
	}
	w.tell(&w.foreign, hongbao.SettleForeign, id, 1, nil)
	w.mu.Lock()
	seen := w.foreignOf[id] == owner
	w.foreignOf[id] = owner
	w.mu.Unlock()
	if !seen {
		w.log.Error("campaign owned by another ledger or sink: not settled, refunded or reaped here", "campaign", id,
			"owner", owner, "self", me, "fix", "run the owner's scheduler, or change the owner with hongbao owner if it is wrong")
	}
	return false, nil
}

// mine is own without the count and the log: whether this worker (of
// identity me) settles campaign id, and the owner it records.
func (w *Worker) mine(ctx context.Context, id string, root redisstore.Snapshot, rk redisstore.Keys) (ok bool, owner, me string, err error) {
	if me, err = w.Owner(ctx); err != nil {
		return false, "", "", err
	}
	owner = root.Meta[redisstore.OwnerField]
	if owner == "" && me != "" {
		owner, _, err = w.store.SetOwner(ctx, rk, "", me, "")
		if errors.Is(err, redisstore.ErrNoCampaign) {
			return false, "", me, nil // gone meanwhile: the next pass sees it so
		}
		if err != nil {
			return false, "", me, fmt.Errorf("claim: %w", err)
		}
		if owner == me {
			w.log.Info("claimed a campaign that recorded no owner", "campaign", id, "owner", me)
			root.Meta[redisstore.OwnerField] = me
		}
	}
	if owner == me {
		w.forgetForeign(id)
		return true, owner, me, nil
	}
	return false, owner, me, nil
}

// forgetForeign drops id from the campaigns logged as foreign (it is this
// worker's now, or gone).
func (w *Worker) forgetForeign(id string) {
	w.mu.Lock()
	delete(w.foreignOf, id)
	w.mu.Unlock()
}

// owned returns ctx carrying the owner root records, for the ledger's
// check (ledger.WithOwner); ctx as it is when it records none.
func owned(ctx context.Context, root redisstore.Snapshot) context.Context {
	if o := root.Meta[redisstore.OwnerField]; o != "" {
		return ledger.WithOwner(ctx, o)
	}
	return ctx
}
