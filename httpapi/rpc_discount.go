package httpapi

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// The payment system's discount procedures: Reserve, Confirm and Cancel
// as their JSON routes (discount.go), under the payment key, through
// reserveOp, confirmOp and cancelOp.

// rpcDiscounts implements the DiscountService.
type rpcDiscounts struct{ s *Server }

var _ hongbaov1connect.DiscountServiceHandler = rpcDiscounts{}

func (d rpcDiscounts) Reserve(ctx context.Context, req *connect.Request[hongbaov1.ReserveRequest]) (*connect.Response[hongbaov1.ReserveResponse], error) {
	s, m, route := d.s, req.Msg, req.Spec().Procedure
	if _, err := s.admit(ctx, req.Spec(), req.Header(), req.Peer(), "", s.paymentGate); err != nil {
		return nil, err
	}
	id := m.GetCampaignId()
	err := checkCampaignID(id)
	var rv reservation
	if err == nil {
		fields := reserveRequest{UserID: given(m.GetUserId()), OrderID: given(m.GetOrderId())}
		switch a := m.GetOrderAmount().(type) {
		case *hongbaov1.ReserveRequest_OrderAmountCents:
			fields.OrderAmountCents = &a.OrderAmountCents
		case *hongbaov1.ReserveRequest_OrderAmountDecimal:
			fields.OrderAmount = &a.OrderAmountDecimal
		}
		rv, err = fields.check()
	}
	if err != nil {
		return nil, s.rpcFail(route, err)
	}
	r, err := s.reserveOp(ctx, id, rv)
	if err != nil {
		return nil, s.rpcFail(route, err)
	}
	out := &hongbaov1.ReserveResponse{Outcome: hongbaov1.ReserveOutcome(r.Outcome), OrderId: r.Order}
	if r.Outcome.HasAmount() {
		out.AmountCents, out.Amount, out.ExpiresAt = r.Cents, hongbao.FormatCents(r.Cents), timestamppb.New(r.ExpiresAt)
	}
	return connect.NewResponse(out), nil
}

func (d rpcDiscounts) Confirm(ctx context.Context, req *connect.Request[hongbaov1.ConfirmRequest]) (*connect.Response[hongbaov1.ConfirmResponse], error) {
	m := req.Msg
	r, err := d.endOrder(ctx, req, m.GetCampaignId(), m.GetUserId(), m.GetOrderId(), d.s.confirmOp)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&hongbaov1.ConfirmResponse{State: hongbaov1.OrderState_ORDER_STATE_CONFIRMED, OrderId: r.Order,
		AmountCents: r.Cents, Amount: hongbao.FormatCents(r.Cents)}), nil
}

func (d rpcDiscounts) Cancel(ctx context.Context, req *connect.Request[hongbaov1.CancelRequest]) (*connect.Response[hongbaov1.CancelResponse], error) {
	m := req.Msg
	r, err := d.endOrder(ctx, req, m.GetCampaignId(), m.GetUserId(), m.GetOrderId(), d.s.cancelOp)
	if err != nil {
		return nil, err
	}
	state := hongbaov1.OrderState_ORDER_STATE_CANCELLED
	if r.State == hongbao.Expired {
		state = hongbaov1.OrderState_ORDER_STATE_EXPIRED
	}
	return connect.NewResponse(&hongbaov1.CancelResponse{State: state, OrderId: r.Order}), nil
}

// endOrder runs a confirm or a cancel (call, its operation) as the JSON
// routes' endOrder does: the gates, then the campaign id, the order id
// and the user, in that order, then the call.
func (d rpcDiscounts) endOrder(ctx context.Context, req connect.AnyRequest, id, user, order string,
	call func(ctx context.Context, id, user, order string) (hongbao.Reservation, error)) (hongbao.Reservation, error) {
	s, route := d.s, req.Spec().Procedure
	if _, err := s.admit(ctx, req.Spec(), req.Header(), req.Peer(), "", s.paymentGate); err != nil {
		return hongbao.Reservation{}, err
	}
	err := checkCampaignID(id)
	if err == nil {
		err = checkOrderID(order)
	}
	if err == nil {
		_, err = checkUserField(given(user))
	}
	if err != nil {
		return hongbao.Reservation{}, s.rpcFail(route, err)
	}
	r, err := call(ctx, id, user, order)
	if err != nil {
		return hongbao.Reservation{}, s.rpcFail(route, err)
	}
	return r, nil
}

// given is a proto3 string field as the JSON decoders read a field: nil
// when it is empty (not sent), so that the answer says it is required.
func given(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
