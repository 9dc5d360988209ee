package hongbao

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/split"
)

// Errors of discount calls, beside the engine's others (ErrCampaignNotFound
// for an unknown discount campaign, ErrBusy, ErrOutcomeUnknown).
var (
	// ErrNoReservation: the user holds no reservation of that order.
	ErrNoReservation = sentinel("no such reservation")
	// ErrReservationExpired: the order's reservation expired (by the
	// Redis clock) and its amount went back; it cannot be confirmed, and
	// the order cannot be reserved again: use a new order id.
	ErrReservationExpired = sentinel("reservation expired")
	// ErrReservationCancelled: the order's reservation was cancelled; it
	// cannot be confirmed, and the order cannot be reserved again.
	ErrReservationCancelled = sentinel("reservation cancelled")
	// ErrReservationConfirmed: the order's discount is confirmed; it can
	// no longer be cancelled.
	ErrReservationConfirmed = sentinel("reservation confirmed")
	// ErrOrderMismatch: the order holds a reservation (held or confirmed)
	// made for another order amount. An order is one request, as an
	// Idempotency-Key is: the stored discount may exceed the new amount,
	// so it is not answered; a new amount needs a new order id.
	ErrOrderMismatch = sentinel("order reserved for another amount")
)

// Create validates spec, draws the amounts (split.Discounts),
// deals them to the shards (each shard's tail last), loads them and makes
// the campaign live, the root shard last, so no reservation sees it in
// part. Creates of the same id may run at once, in one process or in
// many: exactly one creates the campaign, every other waits until it is
// live and returns ErrCampaignExists, as for Engine.Create (create.go). A
// create that crashed can be run again with the same id. A campaign that
// exists past loading is ErrCampaignExists (an *ExistsError), once it is
// registered again; a refused spec a *SpecError. As for Create, the
// campaign is registered before it goes live. When Config.Packets is a
// ledger, an id the ledger knows as settled while Redis no longer holds
// it is ErrCampaignRetired.
func (ds Discounts) Create(ctx context.Context, spec DiscountSpec) (*Discount, error) {
	for {
		d, err := ds.createOnce(ctx, spec)
		var held *heldError
		if !errors.As(err, &held) {
			return d, err
		}
		spec.ID = held.id
		root := ds.e.store.NS().DiscountShardKeys(held.id, 1, 0).Keys()
		if err := ds.e.awaitLoad(ctx, "create discount", held.id, root); err != nil {
			return nil, ds.e.registerExisting(ctx, "create discount", kindDiscount, err)
		}
	}
}

// createOnce is one attempt of Create: a *heldError when another create
// holds the load. Stopped anywhere after the root's begin and before its
// activation, the campaign stays loading under this create's hold until
// it lapses, and the next create of the id begins every shard again.
func (ds Discounts) createOnce(ctx context.Context, spec DiscountSpec) (_ *Discount, err error) {
	d, queues, err := prepareDiscount(spec)
	if err != nil {
		return nil, err
	}
	known, err := ds.e.discountKnown(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	if d.Owner, err = ds.e.Owner(ctx); err != nil {
		return nil, opErr("create discount", d.ID, err)
	}
	layout := ds.e.store.NS().DiscountLayout(d.ID, d.Shards)
	root := layout[0].Keys()
	l := redisstore.Loader{Token: newToken(), Hold: ds.e.cfg.LoadHold}
	b, err := ds.e.store.DiscountBegin(ctx, layout[0], l, discountMeta(d, 0, queues[0]))
	if err := begun("create discount", d.ID, b, err); err != nil {
		return nil, ds.e.registerExisting(ctx, "create discount", kindDiscount, err)
	}
	h := ds.e.keep(ctx, root, l.Token)
	defer func() {
		if lost := h.stop(); err != nil && !lost && !isHeld(err) {
			ds.e.giveUp(h, root, l.Token)
		}
	}()
	// Stopped from here to the root's activation, the campaign is loading
	// under this create's hold; the create that takes the load over begins
	// every shard again (one activated that never served included).
	l.Epoch = b.Epoch
	for k := 1; k < d.Shards; k++ {
		b, err := ds.e.store.DiscountBegin(h.ctx, layout[k], l, discountMeta(d, k, queues[k]))
		if err := h.shardBegun("create discount", d.ID, b, err); err != nil {
			return nil, ds.e.registerExisting(ctx, "create discount", kindDiscount, err)
		}
	}
	if known {
		// Nothing of it was past loading: its keys expired after the check
		// above, or a refused create left this load. Never live again.
		return nil, opErr("create discount", d.ID, ErrCampaignRetired)
	}
	loaded := 0
	for k, keys := range layout {
		if err := ds.e.store.Load(h.ctx, keys.Keys(), l.Token, int64(k+1), int64(d.Shards), queues[k], ds.e.progress(d.Quota, loaded)); err != nil {
			return nil, h.lostErr(d.ID, opErr("create discount", d.ID, mapStoreErr(err)))
		}
		loaded += len(queues[k])
	}
	window := Spec{OpensAt: spec.OpensAt, ClosesAt: spec.ClosesAt}
	opens, closes, err := ds.e.window(h.ctx, window)
	if err != nil {
		return nil, h.lostErr(d.ID, opErr("create discount", d.ID, err))
	}
	if err := ds.e.register(h.ctx, "create discount", d.ID, kindDiscount, closes); err != nil {
		return nil, h.lostErr(d.ID, err)
	}
	for k := d.Shards - 1; k > 0; k-- {
		if _, err := ds.e.store.Activate(h.ctx, layout[k].Keys(), l.Token, opens, closes, ds.e.cfg.DefaultWindow.Milliseconds()); err != nil {
			return nil, h.lostErr(d.ID, ds.e.activateErr(ctx, d.ID, kindDiscount, window, err))
		}
	}
	// As for red packets, the keeper stops before the root's activation.
	if h.stop() {
		return nil, &heldError{id: d.ID}
	}
	act, err := ds.e.store.Activate(ctx, root, l.Token, opens, closes, ds.e.cfg.DefaultWindow.Milliseconds())
	if err != nil {
		return nil, ds.e.activateErr(ctx, d.ID, kindDiscount, window, err)
	}
	ds.e.discounts.learn(d.ID, d.Shards)
	d.State = State(act.State)
	d.OpensAt, d.ClosesAt = time.UnixMilli(act.OpensAt), time.UnixMilli(act.ClosesAt)
	if act.ClosesAt != closes {
		if err := ds.e.register(ctx, "create discount", d.ID, kindDiscount, act.ClosesAt); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// prepareDiscount validates a spec, draws its amounts and deals them.
func prepareDiscount(spec DiscountSpec) (*Discount, [][]int64, error) {
	sp, err := spec.check()
	if err != nil {
		return nil, nil, err
	}
	d := &Discount{
		ID: spec.ID, State: StateLoading, Budget: sp.Budget, Quota: sp.Quota, Min: sp.Min, Max: sp.Max,
		PerUserCount: spec.PerUserCount, PerUserAmount: spec.PerUserAmount, Shards: max(spec.Shards, 1),
		Hold: spec.Hold, Funding: spec.Funding,
	}
	if d.ID == "" {
		d.ID = newCampaignID()
	}
	if d.Funding == "" {
		d.Funding = DefaultFunding
	}
	if d.Hold == 0 {
		d.Hold = DefaultHold
	}
	if spec.Seed != nil {
		d.Seed = *spec.Seed
	} else if d.Seed, err = split.NewSeed(); err != nil {
		return nil, nil, opErr("create discount", d.ID, err)
	}
	lists, err := split.Discounts(sp, d.Seed)
	if err != nil {
		return nil, nil, fromSplit(err)
	}
	d.TailCount = len(lists.Tail)
	return d, lists.Deal(d.Shards, d.Seed), nil
}

// discountMeta is the meta of shard k, dealt share: the spec (every
// shard needs the limits; the root is the campaign's record), the layout
// and its share.
func discountMeta(d *Discount, k int, share []int64) redisstore.DiscountMeta {
	return redisstore.DiscountMeta{
		Budget: d.Budget, Quota: int64(d.Quota), Min: d.Min, Max: d.Max,
		PerUserCount: int64(d.PerUserCount), PerUserAmount: d.PerUserAmount,
		HoldMs: d.Hold.Milliseconds(), Funding: d.Funding, Seed: d.Seed, TailCount: int64(d.TailCount),
		ShardShare: dealt(d.Shards, k, share), Owner: d.Owner,
	}
}

// checkOrder validates the ids of an order call.
func checkOrder(id, user, order string) error {
	if err := ValidateCampaignID(id); err != nil {
		return err
	}
	if err := ValidateUserID(user); err != nil {
		return err
	}
	return ValidateOrderID(order)
}

// Reserve reserves a discount of campaign id for user's order of
// orderCents, held until the campaign's Hold passes. At most once per
// (user, order): a repeat answers ReservedAlready with the same discount
// (also once it is confirmed) when orderCents is the amount it was
// reserved for, else ErrOrderMismatch; an order whose reservation was
// cancelled or expired is ErrReservationCancelled or ErrReservationExpired.
// A campaign closed because it was exhausted answers Exhausted. Business
// outcomes (Exhausted, OverLimit, not open, closed) are in the
// Reservation. As for Grab: a full queue is ErrBusy (nothing attempted),
// a lost reply ErrOutcomeUnknown (a retry answers what was reserved).
// The engine's observers hear it, as they hear Confirm and Cancel.
func (ds Discounts) Reserve(ctx context.Context, id, user, order string, orderCents int64) (Reservation, error) {
	return ds.e.discountObserved(OpReserve, id, user, order, func() (Reservation, error) {
		return ds.reserve(ctx, id, user, order, orderCents)
	})
}

func (ds Discounts) reserve(ctx context.Context, id, user, order string, orderCents int64) (Reservation, error) {
	if err := checkOrder(id, user, order); err != nil {
		return Reservation{}, err
	}
	if orderCents < 1 || orderCents > split.MaxTotal {
		return Reservation{}, &AmountError{Input: strconv.FormatInt(orderCents, 10), Reason: "an order amount must be within 0.01 and the largest budget"}
	}
	res, err := ds.e.discounts.do(ctx, opReserve, id, user, redisstore.DiscountCall{User: user, Order: order, Cents: orderCents})
	if err != nil {
		return Reservation{}, discountErr("reserve", id, err)
	}
	r := Reservation{Campaign: id, User: user, Order: order}
	switch res.Code {
	case redisstore.DiscountReserved, redisstore.DiscountAlready, redisstore.DiscountConfirmed:
		r.Outcome, r.State = Reserved, Held
		if res.Code != redisstore.DiscountReserved {
			r.Outcome = ReservedAlready
		}
		if res.Code == redisstore.DiscountConfirmed {
			r.State = Confirmed
		}
		r.Seq, r.Cents, r.ExpiresAt = res.Seq, res.Cents, time.UnixMilli(res.ExpiresMs)
	case redisstore.DiscountExhausted, redisstore.DiscountNotOpen, redisstore.DiscountClosed, redisstore.DiscountLimit,
		redisstore.DiscountPaused, redisstore.DiscountBlocked:
		r.Outcome = ReserveOutcome(res.Code)
	default:
		return Reservation{}, codeErr("reserve", id, res.Code)
	}
	return r, nil
}

// Confirm makes user's reservation of order final; it then
// settles into the ledger. A repeat answers the same (Again set). A
// reservation past its hold is ErrReservationExpired, a cancelled one
// ErrReservationCancelled, an unknown order ErrNoReservation. Confirms
// are accepted after the campaign closed, until the hold ends.
func (ds Discounts) Confirm(ctx context.Context, id, user, order string) (Reservation, error) {
	return ds.e.discountObserved(OpConfirm, id, user, order, func() (Reservation, error) {
		return ds.confirm(ctx, id, user, order)
	})
}

func (ds Discounts) confirm(ctx context.Context, id, user, order string) (Reservation, error) {
	res, err := ds.e.settleOrder(ctx, opConfirm, "confirm", id, user, order)
	if err != nil {
		return Reservation{}, err
	}
	switch res.Code {
	case redisstore.DiscountReserved, redisstore.DiscountAlready:
		return Reservation{Campaign: id, User: user, Order: order, State: Confirmed, Again: res.Code == redisstore.DiscountAlready,
			Seq: res.Seq, Cents: res.Cents, ExpiresAt: time.UnixMilli(res.ExpiresMs)}, nil
	default:
		return Reservation{}, codeErr("confirm", id, res.Code)
	}
}

// Cancel releases user's reservation of order: its amount goes
// back to be reserved by others and the user's usage goes down. A repeat
// answers the same (Again set); a reservation that had expired answers
// State Expired (its amount went back too). A confirmed one is
// ErrReservationConfirmed, an unknown order ErrNoReservation.
func (ds Discounts) Cancel(ctx context.Context, id, user, order string) (Reservation, error) {
	return ds.e.discountObserved(OpCancel, id, user, order, func() (Reservation, error) {
		return ds.cancel(ctx, id, user, order)
	})
}

func (ds Discounts) cancel(ctx context.Context, id, user, order string) (Reservation, error) {
	res, err := ds.e.settleOrder(ctx, opCancel, "cancel", id, user, order)
	if err != nil {
		return Reservation{}, err
	}
	r := Reservation{Campaign: id, User: user, Order: order, Seq: res.Seq, Cents: res.Cents}
	switch res.Code {
	case redisstore.DiscountReserved, redisstore.DiscountAlready:
		r.State, r.Again = Cancelled, res.Code == redisstore.DiscountAlready
	case redisstore.DiscountExpired:
		r.State = Expired
	default:
		return Reservation{}, codeErr("cancel", id, res.Code)
	}
	return r, nil
}

// settleOrder runs op, a confirm or a cancel named name, on user's order
// of campaign id.
func (e *Engine) settleOrder(ctx context.Context, op opcode, name, id, user, order string) (redisstore.DiscountResult, error) {
	if err := checkOrder(id, user, order); err != nil {
		return redisstore.DiscountResult{}, err
	}
	res, err := e.discounts.do(ctx, op, id, user, redisstore.DiscountCall{User: user, Order: order})
	if err != nil {
		return redisstore.DiscountResult{}, discountErr(name, id, err)
	}
	return res, nil
}

// codeErrs are the errors of the script codes that are not an answer of
// the operation that got them.
var codeErrs = map[int]error{
	redisstore.DiscountNoCampaign: ErrCampaignNotFound,
	redisstore.DiscountNotFound:   ErrNoReservation,
	redisstore.DiscountCancelled:  ErrReservationCancelled,
	redisstore.DiscountExpired:    ErrReservationExpired,
	redisstore.DiscountConfirmed:  ErrReservationConfirmed,
	redisstore.DiscountMismatch:   ErrOrderMismatch,
}

// codeErr is the error of a script code that is not an answer of op.
func codeErr(op, id string, code int) error {
	if err, ok := codeErrs[code]; ok {
		return opErr(op, id, err)
	}
	return opErr(op, id, fmt.Errorf("unknown outcome code %d", code))
}

// discountErr wraps an error of a discount call, ErrBusy bare as Grab does.
func discountErr(op, id string, err error) error {
	if err == ErrBusy {
		return err
	}
	return opErr(op, id, mapStoreErr(err))
}

// Status reads a discount campaign's state and counters.
func (ds Discounts) Status(ctx context.Context, id string) (*DiscountStatus, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	v, err := ds.e.store.ReadDiscount(ctx, id)
	if err != nil {
		return nil, opErr("discount status", id, mapStoreErr(err))
	}
	ds.e.discounts.learn(id, len(v.Shards))
	return discountStatusFrom(id, v)
}

// discountStatusFrom sums the shards of a discount campaign.
func discountStatusFrom(id string, v *redisstore.DiscountView) (*DiscountStatus, error) {
	root := v.Root()
	m := root.Meta
	if State(m["state"]) == StateLoading || m["kind"] != "discount" {
		return nil, opErr("discount status", id, ErrCampaignNotFound)
	}
	st := &DiscountStatus{Now: time.UnixMilli(root.Now)}
	st.Discount = discountOf(id, root)
	st.Shards = len(v.Snaps)
	st.CloseReason = m["close_reason"]
	var moveCount, moveCents int64
	for _, sn := range v.Snaps {
		st.ConfirmedCount += sn.Int("confirmed_count")
		st.ConfirmedCents += sn.Int("confirmed_cents")
		st.ReservedCount += sn.Int("reserved_count")
		st.ReservedCents += sn.Int("reserved_cents")
		st.RefundedCents += sn.Int("refunded_cents")
		st.CompensationCents += sn.Int("comp_cents")
		moveCount += sn.Int("out_count") - sn.Int("in_count")
		moveCents += sn.Int("out_cents") - sn.Int("in_cents")
		if sn.Meta["paused"] == "1" {
			st.PausedShards++
		}
		st.BlockedUsers += sn.Int("blocked")
		held := sn.Int("base_count") + sn.Int("in_count") - sn.Int("out_count")
		if sn.Meta["state"] == string(StateSettled) {
			st.RemainingCount += held - sn.Int("confirmed_count") - sn.Int("reserved_count")
			st.RemainingCents += sn.Int("refunded_cents")
			continue
		}
		st.RemainingCount += sn.PoolLen
		st.RemainingCents += sn.Int("base_cents") + sn.Int("in_cents") - sn.Int("out_cents") -
			sn.Int("taken_cents") + sn.Int("returned_cents") + sn.Int("comp_cents")
	}
	st.Paused = m["paused"] == "1"
	st.InFlight = moveCount
	st.RemainingCount += moveCount
	st.RemainingCents += moveCents
	st.State, st.CloseReason = stateInForce(st.State, st.CloseReason, root)
	return st, nil
}

// discountOf reads a campaign's spec from its root shard's meta.
func discountOf(id string, root redisstore.Snapshot) Discount {
	m := root.Meta
	d := Discount{
		ID: id, State: State(m["state"]), Budget: root.Int("budget"), Quota: int(root.Int("quota")),
		Min: root.Int("min"), Max: root.Int("max"), PerUserCount: int(root.Int("per_user_count")),
		PerUserAmount: root.Int("per_user_amount"), Shards: int(max(root.Int("shards"), 1)),
		Hold:    time.Duration(root.Int("hold_ms")) * time.Millisecond,
		OpensAt: time.UnixMilli(root.Int("opens_at")), ClosesAt: time.UnixMilli(root.Int("closes_at")),
		Funding: m["funding"], TailCount: int(root.Int("tail_count")), Owner: m[redisstore.OwnerField],
	}
	d.Seed, _ = strconv.ParseUint(m["seed"], 10, 64)
	return d
}

// CloseCampaign stops reservations of a discount campaign now (every
// shard, the root last); confirms of reservations held go on until their
// hold ends. Closing a closed campaign changes nothing.
func (ds Discounts) CloseCampaign(ctx context.Context, id string) (*DiscountStatus, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	v, err := ds.e.store.ReadDiscount(ctx, id)
	if err == nil {
		err = closeShards(ctx, ds.e.store, redisstore.ShardViews(v.Shards), CloseOperator)
	}
	if err != nil {
		return nil, opErr("close discount", id, mapStoreErr(err))
	}
	return ds.e.Discounts().Status(ctx, id)
}

// Campaigns lists the live discount campaigns, those not yet
// settled, by close time.
func (ds Discounts) Campaigns(ctx context.Context) ([]string, error) {
	ids, err := ds.e.store.Campaigns(ctx, redisstore.Discount)
	if err != nil {
		return nil, plainStoreErr(err)
	}
	return ids, nil
}

// Reap expires the reservations of campaign id whose hold has
// passed, on every shard, returning each amount (disc_reap.lua), and says
// how many. Running it twice changes nothing the second time.
func (ds Discounts) Reap(ctx context.Context, id string) (int, error) {
	if err := ValidateCampaignID(id); err != nil {
		return 0, err
	}
	v, err := ds.e.store.ReadDiscount(ctx, id)
	if err != nil {
		return 0, opErr("reap", id, mapStoreErr(err))
	}
	total := 0
	for _, k := range v.Shards {
		for more := true; more; {
			var n int
			n, more, err = ds.e.store.Reap(ctx, k, redisstore.MaxReap)
			total += n
			if err != nil {
				return total, opErr("reap", id, mapStoreErr(err))
			}
		}
	}
	return total, nil
}

// ReapAll runs Reap on every live discount campaign and
// returns how many reservations expired. A campaign that vanished between
// the listing and the reap is skipped.
func (ds Discounts) ReapAll(ctx context.Context) (int, error) {
	ids, err := ds.e.Discounts().Campaigns(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, id := range ids {
		n, err := ds.e.Discounts().Reap(ctx, id)
		total += n
		if err != nil && !errors.Is(err, ErrCampaignNotFound) {
			return total, err
		}
	}
	return total, nil
}

// RunReaper runs ReapAll every period (default 1s) until ctx
// ends; onErr, if not nil, hears each failed round (the next round tries
// again). A service runs one reaper under its scheduler lease; more would
// be safe, only wasteful, since a reap is idempotent.
func (ds Discounts) RunReaper(ctx context.Context, every time.Duration, onErr func(error)) {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := ds.e.Discounts().ReapAll(ctx); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Discounts are the calls of an engine's discount campaigns, the
// counterpart of the red packet calls on Engine itself:
// eng.Discounts().Create, .Reserve, .Confirm, .Cancel, .Status and the
// rest. It is a view of the engine, as cheap to copy as a pointer.
type Discounts struct{ e *Engine }

// Discounts returns the calls of the engine's discount campaigns.
func (e *Engine) Discounts() Discounts { return Discounts{e: e} }
