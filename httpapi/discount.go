package httpapi

import (
	"context"
	"net/http"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
)

// The discount routes: random instant discounts at payment time. An
// operator creates a campaign (admin key); then, for each payment, the
// payment system (payment key) reserves a discount for the order of the
// user it names, and confirms it when the payment went through or cancels
// it when it failed; a reservation neither confirmed nor cancelled
// expires after the campaign's hold. Every call is idempotent by (user,
// order id). A user's own token is refused there (403): the user is not
// the one who knows whether an order was paid, or for how much.

// discountRoutes registers the discount routes.
func (s *Server) discountRoutes() {
	s.handle("POST /v1/discounts", s.v1(s.admin(s.createDiscount)))
	s.handle("GET /v1/discounts", s.v1(s.admin(s.listDiscounts)))
	s.handle("GET /v1/discounts/{id}", s.v1(s.admin(s.getDiscount)))
	s.handle("POST /v1/discounts/{id}/close", s.v1(s.admin(s.closeDiscount)))
	s.handle("POST /v1/discounts/{id}/reserve", s.v1(s.payment(s.reserveDiscount)))
	s.handle("POST /v1/discounts/{id}/orders/{order_id}/confirm", s.v1(s.payment(s.confirmDiscount)))
	s.handle("POST /v1/discounts/{id}/orders/{order_id}/cancel", s.v1(s.payment(s.cancelDiscount)))
}

func (s *Server) createDiscount(w http.ResponseWriter, r *http.Request, admin string) {
	create(s, &createKind[hongbao.DiscountSpec, *hongbao.Discount]{
		name: "discount", action: "create-discount",
		decode:   decodeDiscount,
		id:       func(spec *hongbao.DiscountSpec) *string { return &spec.ID },
		ledgerID: ledger.DiscountCampaign,
		create:   s.cfg.Discounts.Create,
		status: func(ctx context.Context, id string) (*hongbao.Discount, error) {
			st, err := s.cfg.Discounts.Status(ctx, id)
			if err != nil {
				return nil, err
			}
			return &st.Discount, nil
		},
		same: sameDiscount,
		created: func(_ context.Context, r *http.Request, admin string, _ hongbao.DiscountSpec, d *hongbao.Discount) {
			s.log.Info("admin action", "who", admin, "action", "create-discount", "discount", d.ID,
				"budget_cents", d.Budget, "quota", d.Quota, "min_cents", d.Min, "max_cents", d.Max,
				"per_user_count", d.PerUserCount, "per_user_amount_cents", d.PerUserAmount, "shards", d.Shards,
				"hold", d.Hold, "funding", d.Funding, "opens_at", d.OpensAt, "closes_at", d.ClosesAt, "remote", s.remote(r))
		},
		json: func(d *hongbao.Discount) any { return discountJSON(d) },
	}, w, r, admin)
}

// sameDiscount says whether campaign d is what spec creates: every field
// the request gave, and the defaults of those it left out.
func sameDiscount(d *hongbao.Discount, spec hongbao.DiscountSpec) bool {
	def := func(v, zero int64) int64 {
		if v == 0 {
			return zero
		}
		return v
	}
	funding := spec.Funding
	if funding == "" {
		funding = hongbao.DefaultFunding
	}
	hold := spec.Hold
	if hold == 0 {
		hold = hongbao.DefaultHold
	}
	return d.Budget == spec.Budget && d.Quota == spec.Quota && d.Min == def(spec.Min, 1) && d.Max == def(spec.Max, spec.Budget) &&
		d.PerUserCount == spec.PerUserCount && d.PerUserAmount == spec.PerUserAmount && d.Shards == max(spec.Shards, 1) &&
		d.Hold == hold && d.Funding == funding && (spec.Seed == nil || *spec.Seed == d.Seed) &&
		sameWindow(spec.OpensAt, spec.ClosesAt, d.OpensAt, d.ClosesAt)
}

func (s *Server) getDiscount(w http.ResponseWriter, r *http.Request, _ string) {
	s.onCampaign(w, r, s.idTarget, func(ctx context.Context, id string) (any, error) {
		st, err := s.cfg.Discounts.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		return discountStatusJSON(st), nil
	})
}

func (s *Server) closeDiscount(w http.ResponseWriter, r *http.Request, admin string) {
	s.onCampaign(w, r, s.actionTarget, func(ctx context.Context, id string) (any, error) {
		st, err := s.cfg.Discounts.CloseCampaign(ctx, id)
		if err != nil {
			return nil, err
		}
		s.log.Info("admin action", "who", admin, "action", "close-discount", "discount", id,
			"state", st.State, "close_reason", st.CloseReason, "remote", s.remote(r))
		return discountStatusJSON(st), nil
	})
}

func (s *Server) reserveDiscount(w http.ResponseWriter, r *http.Request, _ string) {
	id, rv, ok := bodyTarget(s, w, r, decodeReserve)
	if !ok {
		return
	}
	res, err := s.reserveOp(r.Context(), id, rv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, reserveJSON(res))
}

// orderTarget reads the campaign and order ids of confirm and cancel and
// the user of the body; on failure it has answered.
func (s *Server) orderTarget(w http.ResponseWriter, r *http.Request) (id, order, user string, ok bool) {
	id, err := campaignID(r)
	if err == nil {
		order = r.PathValue("order_id")
		err = checkOrderID(order)
	}
	if err == nil {
		var body []byte
		if body, err = readBody(w, r, s.cfg.MaxBodyBytes); err == nil {
			user, err = decodeOrderUser(body)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return "", "", "", false
	}
	return id, order, user, true
}

func (s *Server) confirmDiscount(w http.ResponseWriter, r *http.Request, _ string) {
	s.endOrder(w, r, s.confirmOp, confirmJSON)
}

func (s *Server) cancelDiscount(w http.ResponseWriter, r *http.Request, _ string) {
	s.endOrder(w, r, s.cancelOp, cancelJSON)
}

// endOrder answers a confirm or a cancel of an order's reservation: call
// is its operation (ops.go), answer spells its result.
func (s *Server) endOrder(w http.ResponseWriter, r *http.Request,
	call func(ctx context.Context, id, user, order string) (hongbao.Reservation, error), answer func(hongbao.Reservation) orderOut) {
	id, order, user, ok := s.orderTarget(w, r)
	if !ok {
		return
	}
	res, err := call(r.Context(), id, user, order)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer(res))
}
