package hongbao

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Observer hears what an Engine and a settlement worker do: each grab and
// discount call with its answer and latency, each batch script call, and
// each result of settlement. Metrics are one observer (package metrics),
// the scheduler's wake-up of settlement another (scheduler.Publisher), an
// embedder's own logs or audit a third: an engine and a worker take any
// number of them (Config.Observers, Engine.Observe, settle.Config.Observers),
// and adding one never replaces another.
//
// Its methods run on the caller's goroutine, on the hot path (a grab's,
// a batch's, a settlement pass's): they must not block, and must be safe
// for concurrent use. An engine without observers spends nothing on them:
// no clock read, no event built. Embed NopObserver to implement only the
// methods you need; methods added to Observer later are then no-ops for
// you.
type Observer interface {
	// ObserveGrab hears each Engine.Grab as it returns.
	ObserveGrab(GrabEvent)
	// ObserveDiscount hears each reserve, confirm and cancel of a
	// discount campaign (Discounts) as it returns.
	ObserveDiscount(DiscountEvent)
	// ObserveBatch hears each batch of coalesced calls the engine sent to
	// Redis, once it is answered.
	ObserveBatch(BatchEvent)
	// ObserveSettle hears each result of a settlement worker (package
	// settle): what it wrote, refused, failed on or skipped.
	ObserveSettle(SettleEvent)
}

// NopObserver does nothing. Embed it in an observer to implement only
// some of Observer's methods.
type NopObserver struct{}

// ObserveGrab implements Observer.
func (NopObserver) ObserveGrab(GrabEvent) {}

// ObserveDiscount implements Observer.
func (NopObserver) ObserveDiscount(DiscountEvent) {}

// ObserveBatch implements Observer.
func (NopObserver) ObserveBatch(BatchEvent) {}

// ObserveSettle implements Observer.
func (NopObserver) ObserveSettle(SettleEvent) {}

// GrabEvent is one grab's answer, as Observer.ObserveGrab hears it.
type GrabEvent struct {
	// Grant is what Grab returned; its Campaign and User are set even when
	// Err is not nil.
	Grant Grant
	// Err is Grab's error (ErrBusy, ErrOutcomeUnknown,
	// ErrCampaignNotFound, a refused id...), nil when Grant.Outcome
	// answers.
	Err error
	// Duration is the time Grab took, queueing and batching included.
	Duration time.Duration
}

// DiscountOp names a discount call.
type DiscountOp uint8

// The discount calls an observer hears.
const (
	OpReserve DiscountOp = iota + 1
	OpConfirm
	OpCancel
)

// String is the call's name: reserve, confirm or cancel.
func (op DiscountOp) String() string {
	switch op {
	case OpReserve:
		return "reserve"
	case OpConfirm:
		return "confirm"
	case OpCancel:
		return "cancel"
	}
	return "DiscountOp(" + strconv.Itoa(int(op)) + ")"
}

// DiscountEvent is one discount call's answer, as
// Observer.ObserveDiscount hears it.
type DiscountEvent struct {
	// Op is the call.
	Op DiscountOp
	// Reservation is what the call returned; its Campaign, User and Order
	// are set even when Err is not nil.
	Reservation Reservation
	// Err is the call's error, nil when Reservation answers.
	Err error
	// Duration is the time the call took, queueing and batching included.
	Duration time.Duration
}

// BatchEvent is one batch script call (or, for a sharded campaign, the
// calls a batch fanned out to), as Observer.ObserveBatch hears it.
type BatchEvent struct {
	// Op is the operation the batch carried: "grab", "reserve",
	// "confirm" or "cancel".
	Op string
	// Campaign is the campaign the batch's calls were for.
	Campaign string
	// Size is how many coalesced calls the batch carried.
	Size int
	// Duration is the time from sending the batch to its answer, WAIT
	// for replicas and refills of dry shards included.
	Duration time.Duration
	// Err failed the whole batch (every call in it got it), else nil.
	Err error
}

// SettleKind is what a settlement result says.
type SettleKind uint8

// The results of settlement an observer hears. Count says how many.
const (
	// SettleGrants: grants newly written to the ledger or sink.
	SettleGrants SettleKind = iota + 1
	// SettleDiscounts: confirmed discounts newly written.
	SettleDiscounts
	// SettleReplayed: grants or discounts the ledger already had.
	SettleReplayed
	// SettleConflict: a grant or discount refused as conflicting (an
	// incident: it went to the dead stream).
	SettleConflict
	// SettleRefused: an entry or a refund refused as impossible (an
	// incident).
	SettleRefused
	// SettleMalformed: a stream entry that could not be read or that the
	// ledger refused as invalid (an incident).
	SettleMalformed
	// SettleDeleted: pending entries Redis reported deleted before they
	// were settled (an alarm).
	SettleDeleted
	// SettleFailed: a settlement pass failed on Redis or the ledger and
	// is tried again after a backoff; Err says why.
	SettleFailed
	// SettleForeign: a pass met a campaign recorded as another ledger's
	// or sink's, and skipped it.
	SettleForeign
	// SettleRefund: a campaign was refunded and settled.
	SettleRefund
	// SettleReaped: discount reservations whose hold had passed were
	// expired.
	SettleReaped
)

var settleKindNames = [...]string{"", "grants", "discounts", "replayed", "conflict", "refused", "malformed", "deleted",
	"failed", "foreign", "refund", "reaped"}

// String names the kind: grants, discounts, replayed, conflict, refused,
// malformed, deleted, failed, foreign, refund or reaped.
func (k SettleKind) String() string {
	if int(k) < len(settleKindNames) && k > 0 {
		return settleKindNames[k]
	}
	return "SettleKind(" + strconv.Itoa(int(k)) + ")"
}

// SettleEvent is one result of a settlement worker, as
// Observer.ObserveSettle hears it.
type SettleEvent struct {
	// Kind is what happened.
	Kind SettleKind
	// Campaign is the red packet or discount campaign it happened to; ""
	// for a failed pass, which may span many.
	Campaign string
	// Count is how many items: grants, discounts, entries or
	// reservations; 1 for a conflict, a refused entry, a failed pass, a
	// foreign campaign or a refund.
	Count int64
	// Err is why a pass failed (SettleFailed), else nil.
	Err error
}

// observers is the set of an engine's observers, which grows and shrinks
// while grabs read it: a read costs one atomic load, and nothing else when
// the set is empty.
type observers struct {
	mu   sync.Mutex
	last uint64                      // the id of the latest addition
	list atomic.Pointer[[]observing] // nil when empty; replaced, never changed
}

// observing is one addition of an observer.
type observing struct {
	o  Observer
	id uint64
}

// newObservers returns a set holding os (nil entries are skipped).
func newObservers(os []Observer) *observers {
	s := &observers{}
	for _, o := range os {
		s.add(o)
	}
	return s
}

// add adds o after the others and returns the function that takes it out
// again (once; later calls do nothing). A nil o adds nothing.
func (s *observers) add(o Observer) (remove func()) {
	if o == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	id := s.last
	list := append(slices.Clone(s.load()), observing{o: o, id: id})
	s.list.Store(&list)
	var once sync.Once
	return func() { once.Do(func() { s.remove(id) }) }
}

func (s *observers) remove(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := slices.DeleteFunc(slices.Clone(s.load()), func(x observing) bool { return x.id == id })
	if len(list) == 0 {
		s.list.Store(nil)
		return
	}
	s.list.Store(&list)
}

// load returns the observers now, nil when there are none. The slice must
// not be changed.
func (s *observers) load() []observing {
	if s == nil {
		return nil
	}
	if p := s.list.Load(); p != nil {
		return *p
	}
	return nil
}

// Observe adds o to the engine's observers, after those of
// Config.Observers and earlier calls, and returns the function that takes
// it out again. It never replaces an observer: a scheduler's wake-ups of
// settlement, the metrics and an embedder's own hook all hear every grab.
func (e *Engine) Observe(o Observer) (remove func()) { return e.obs.add(o) }

// grabObserved is Grab told to the observers obs.
func (e *Engine) grabObserved(ctx context.Context, obs []observing, id, user string) (Grant, error) {
	start := time.Now()
	g, err := e.grab(ctx, id, user)
	ev := GrabEvent{Grant: g, Err: err, Duration: time.Since(start)}
	ev.Grant.Campaign, ev.Grant.User = id, user
	for _, x := range obs {
		x.o.ObserveGrab(ev)
	}
	return g, err
}

// discountObserved runs call, the discount call op of user's order of
// campaign id, and tells the engine's observers, if any.
func (e *Engine) discountObserved(op DiscountOp, id, user, order string, call func() (Reservation, error)) (Reservation, error) {
	obs := e.obs.load()
	if obs == nil {
		return call()
	}
	start := time.Now()
	r, err := call()
	ev := DiscountEvent{Op: op, Reservation: r, Err: err, Duration: time.Since(start)}
	ev.Reservation.Campaign, ev.Reservation.User, ev.Reservation.Order = id, user, order
	for _, x := range obs {
		x.o.ObserveDiscount(ev)
	}
	return r, err
}
