package hongbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Identified names what a deployment's campaigns settle into: its
// Identity is what a campaign records as its owner (Config.Owner). A
// ledger.Ledger is one (an id created in the ledger when it was first
// migrated), and so is a webhook.Sink (the name of the wallet it pays).
type Identified interface {
	Identity(ctx context.Context) (string, error)
}

var (
	// ErrOwner: the campaign records another owner than the one the call
	// expected (SetOwner). The typed *OwnerError says which.
	ErrOwner = sentinel("campaign has another owner")
	// ErrOwnerSettling: SetOwner found entries of the campaign delivered
	// to the current owner's settlement and not yet acknowledged. Moved
	// now, one whose ledger write committed but whose acknowledgement had
	// not would be settled again into the new owner's ledger: paid twice.
	// Stop the current owner's scheduler (or let it finish) and retry.
	ErrOwnerSettling = sentinel("the current owner is settling the campaign")
)

// OwnerError is an ErrOwner with the owner the campaign records and the
// one the call expected.
type OwnerError struct {
	Campaign string
	Owner    string // the owner the campaign records ("" for none)
	Expected string // the owner the call expected
}

func (e *OwnerError) Error() string { return "hongbao: " + e.bare() }
func (e *OwnerError) bare() string {
	return fmt.Sprintf("campaign %s is owned by %q, not %q", e.Campaign, e.Owner, e.Expected)
}

// Unwrap makes errors.Is(err, ErrOwner) hold.
func (e *OwnerError) Unwrap() error { return ErrOwner }

// OwnerChange is an operator's change of a campaign's owner (SetOwner):
// a campaign created with the wrong owner, or a deployment moved to
// another ledger. The scheduler of the new owner settles what is left to
// settle into its own ledger or sink; what the old one settled stays
// there (reconcile both). Stop the old owner's settlement first: SetOwner
// refuses a campaign whose entries it holds unacknowledged
// (ErrOwnerSettling), and a pass it began before the change may still
// settle, into the old ledger, what it read.
type OwnerChange struct {
	// From is the owner the campaign records now ("" for none): the
	// change is refused (ErrOwner) when it records another, so two
	// operators never undo each other's change unknowingly.
	From string
	// To is the new owner (ValidateOwner).
	To string
	// Reason says why, for whoever reads the campaign next: it is
	// recorded in the campaign with the previous owner and the time.
	// Required.
	Reason string
	// DespitePending changes the owner even while entries are delivered
	// to the current owner's settlement and not acknowledged
	// (ErrOwnerSettling otherwise): for entries the current owner's ledger
	// refused or never received (a reconcile against it shows which),
	// which the new owner's worker then takes over. Any of them the
	// current owner did write is paid twice. Default false.
	DespitePending bool
}

func (c OwnerChange) check() error {
	if err := ValidateOwner(c.To); err != nil {
		return err
	}
	if c.From != "" {
		if err := ValidateOwner(c.From); err != nil {
			return err
		}
	}
	if c.Reason == "" {
		return errors.New("hongbao: an owner change needs a reason")
	}
	return nil
}

// Owner is the owner the engine records in the campaigns it creates:
// Config.Owner, else the Identity of Config.Packets when it has one (read
// once, then kept), else "" (campaigns record none). After Shutdown it is
// ErrClosed.
func (e *Engine) Owner(ctx context.Context) (string, error) {
	if e.life.closing() {
		return "", ErrClosed // Shutdown began: no more ledger reads
	}
	if e.cfg.Owner != "" {
		return e.cfg.Owner, nil
	}
	id, ok := e.cfg.Packets.(Identified)
	if !ok {
		return "", nil
	}
	if o := e.ownerID.Load(); o != nil {
		return *o, nil
	}
	o, err := id.Identity(ctx)
	if err != nil {
		return "", ledgerErr("read the identity of Config.Packets", err)
	}
	if err := ValidateOwner(o); err != nil {
		return "", fmt.Errorf("hongbao: the identity of Config.Packets: %w", err)
	}
	e.ownerID.Store(&o)
	return o, nil
}

// SetOwner changes the owner red packet campaign id records, as an
// operator's explicit action: from ch.From to ch.To, with ch.Reason
// recorded beside it. It returns the campaign's status after the change.
// The scheduler of the new owner takes the campaign over at its next
// pass; the old one no longer touches it. When Config.Packets keeps
// terms, the recorded terms get the new owner too, so a rebuild restores
// it. Changing to the owner the campaign already records changes nothing.
func (e *Engine) SetOwner(ctx context.Context, id string, ch OwnerChange) (*Status, error) {
	if err := e.setOwner(ctx, "set owner", id, kindRedPacket, ch); err != nil {
		return nil, err
	}
	return e.Status(ctx, id)
}

// SetOwner is Engine.SetOwner for discount campaign id.
func (ds Discounts) SetOwner(ctx context.Context, id string, ch OwnerChange) (*DiscountStatus, error) {
	if err := ds.e.setOwner(ctx, "set discount owner", id, kindDiscount, ch); err != nil {
		return nil, err
	}
	return ds.Status(ctx, id)
}

// setOwner runs owner.lua on the root of campaign id of kind k, then
// records the new owner where the kind keeps its terms outside Redis
// (kind.recordOwner). A change whose terms write fails is done in Redis
// already; a retry finds the new owner and writes the terms.
func (e *Engine) setOwner(ctx context.Context, op, id string, k *kind, ch OwnerChange) error {
	if err := ValidateCampaignID(id); err != nil {
		return err
	}
	if err := ch.check(); err != nil {
		return opErr(op, id, err)
	}
	shards, err := k.shards(e, ctx, id)
	if err != nil {
		return opErr(op, id, mapStoreErr(err))
	}
	if !ch.DespitePending {
		if err := e.settling(ctx, op, id, shards); err != nil {
			return err
		}
	}
	root := shards[0]
	now, ok, err := e.store.SetOwner(ctx, root, ch.From, ch.To, ch.Reason)
	if err != nil {
		return opErr(op, id, mapStoreErr(err))
	}
	if !ok {
		return opErr(op, id, &OwnerError{Campaign: id, Owner: now, Expected: ch.From})
	}
	if k.recordOwner == nil {
		return nil
	}
	return k.recordOwner(e, ctx, op, id, ch.To)
}

// ownerInTerms records owner in the terms of red packet campaign id, when
// Config.Packets keeps them.
func (e *Engine) ownerInTerms(ctx context.Context, op, id, owner string) error {
	if e.terms == nil {
		return nil
	}
	t, err := e.terms.Terms(ctx, id)
	if errors.Is(err, ledger.ErrNoPackets) || errors.Is(err, ledger.ErrNoTerms) {
		return nil // created before the terms were recorded: nothing to add to
	}
	if err != nil {
		return opErr(op, id, ledgerErr("read the terms", err))
	}
	if t.Owner == owner {
		return nil
	}
	t.Owner = owner
	if err := e.terms.WriteTerms(ctx, id, t); err != nil {
		return opErr(op, id, ledgerErr("record the owner in the terms", err))
	}
	return nil
}

// settling refuses an owner change while the campaign of shards has
// stream entries delivered to a settlement worker and not yet
// acknowledged (ErrOwnerSettling): entries in flight to the old owner's
// ledger. Entries not delivered yet are the new owner's to settle.
func (e *Engine) settling(ctx context.Context, op, id string, shards []redisstore.Keys) error {
	var pending int64
	for _, k := range shards {
		b, err := e.store.Backlog(ctx, k)
		if err != nil {
			return opErr(op, id, mapStoreErr(err))
		}
		pending += b.Pending
	}
	if pending > 0 {
		return opErr(op, id, fmt.Errorf("%w: %d stream entries delivered and not acknowledged; stop or drain the current owner's settlement, then retry", ErrOwnerSettling, pending))
	}
	return nil
}
