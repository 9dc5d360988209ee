package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// Protocol is what a Client's grabs and payment calls speak
// (Options.Protocol).
type Protocol int

// The protocols.
const (
	JSON    Protocol = iota // the JSON routes (POST /v1/campaigns/{id}/grab, ...)
	Connect                 // the Connect protocol's procedures (hongbao.v1.GrabService/Grab, ...), binary protobuf
	GRPC                    // gRPC's, over HTTP/2
)

func (p Protocol) String() string {
	switch p {
	case JSON:
		return "json"
	case Connect:
		return "connect"
	case GRPC:
		return "grpc"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// rpcClients are the generated clients of a Client under Connect or
// GRPC: unary calls over the Client's HTTP client, a Gateway's streams
// over the same transport without a timeout.
type rpcClients struct {
	grabs     hongbaov1connect.GrabServiceClient
	discounts hongbaov1connect.DiscountServiceClient
	streams   hongbaov1connect.GrabServiceClient
}

func newRPCClients(base string, p Protocol, hc *http.Client) (*rpcClients, error) {
	var opts []connect.ClientOption
	switch p {
	case Connect:
	case GRPC:
		opts = append(opts, connect.WithGRPC())
	default:
		return nil, fmt.Errorf("hongbao client: no such protocol: %v", p)
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP2(true)            // over TLS, on https:// URLs
		tr.Protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge, on http:// URLs
		// A stream may wait long for its next result: pings find a
		// connection that died meanwhile.
		tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 15 * time.Second}
		hc = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	long := *hc
	long.Timeout = 0
	return &rpcClients{
		grabs:     hongbaov1connect.NewGrabServiceClient(hc, base, opts...),
		discounts: hongbaov1connect.NewDiscountServiceClient(hc, base, opts...),
		streams:   hongbaov1connect.NewGrabServiceClient(&long, base, opts...),
	}, nil
}

// header fills a procedure's request header as attempt does a route's.
func (c *Client) header(ctx context.Context, h http.Header) {
	if c.auth != "" {
		h["Authorization"] = []string{c.auth}
	}
	h["User-Agent"] = []string{c.agent}
	if c.prop != nil {
		c.prop(ctx, h)
	}
}

// unary runs a procedure with the retry protocol (every procedure is
// idempotent) and maps its errors onto the JSON routes' (rpcError).
func unary[Req, Res any](ctx context.Context, c *Client, call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (*Res, error) {
	var out *Res
	err := c.retrying(ctx, true, func() error {
		req := connect.NewRequest(msg)
		c.header(ctx, req.Header())
		res, err := call(ctx, req)
		if err != nil {
			return rpcError(ctx, err)
		}
		out = res.Msg
		return nil
	})
	return out, err
}

// rpcError turns a procedure's error into what the JSON route's would
// have been: an answer of the service (its hongbaov1.Error detail names
// the code) is an *Error with the code's HTTP status, Retry-After as the
// route sends it; an answer without the detail (a proxy's) an *Error
// with the status of its RPC code; an error of the transport is a call
// not sent or a reply lost, as for the routes.
func rpcError(ctx context.Context, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return transportError(ctx, err)
	}
	if !connect.IsWireError(ce) {
		if cause := errors.Unwrap(ce); cause != nil {
			return transportError(ctx, cause)
		}
		return transportError(ctx, ce)
	}
	e := &Error{Message: ce.Message(), Status: rpcStatus[ce.Code()]}
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if x, ok := v.(*hongbaov1.Error); ok && x.GetCode() != "" {
			e.Code = x.GetCode()
			if s := statuses[e.Code]; s != 0 {
				e.Status = s
			}
			e.RetryAfter = wholeSeconds(x.GetRetryAfterMs())
		}
	}
	if ra := retryAfter(ce.Meta(), time.Now()); ra > 0 {
		e.RetryAfter = ra // the header (Connect) or trailer (gRPC), as the route's
	}
	if e.Message == "" {
		e.Message = http.StatusText(e.Status)
	}
	return e
}

// wholeSeconds is a wait of ms milliseconds as the JSON routes send it in
// Retry-After: whole seconds, rounded up.
func wholeSeconds(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration((ms+999)/1000) * time.Second
}

// rpcStatus is the HTTP status of an RPC code, for an error that names no
// code of the service (as Connect's protocol maps them).
var rpcStatus = map[connect.Code]int{
	connect.CodeCanceled:           499,
	connect.CodeUnknown:            http.StatusInternalServerError,
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeResourceExhausted:  http.StatusTooManyRequests,
	connect.CodeFailedPrecondition: http.StatusBadRequest,
	connect.CodeAborted:            http.StatusConflict,
	connect.CodeOutOfRange:         http.StatusBadRequest,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
	connect.CodeInternal:           http.StatusInternalServerError,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeDataLoss:           http.StatusInternalServerError,
	connect.CodeUnauthenticated:    http.StatusUnauthorized,
}

// word is an enum value's API word: GRAB_OUTCOME_ALREADY_GRANTED is
// "already_granted" (the proto names each value so, and a test of the
// service holds it).
func word(name, prefix string) (string, error) {
	w, ok := strings.CutPrefix(name, prefix)
	if !ok || w == "UNSPECIFIED" {
		return "", fmt.Errorf("hongbao client: the reply is not what the API describes: %s", name)
	}
	return strings.ToLower(w), nil
}

func (c *Client) grabRPC(ctx context.Context, id string) (*Grab, error) {
	r, err := unary(ctx, c, c.rpc.grabs.Grab, &hongbaov1.GrabRequest{CampaignId: id})
	if err != nil {
		return nil, err
	}
	o, err := word(r.GetOutcome().String(), "GRAB_OUTCOME_")
	if err != nil {
		return nil, err
	}
	return &Grab{Campaign: r.GetCampaignId(), Outcome: o, PacketID: r.GetPacketId(), AmountCents: r.GetAmountCents()}, nil
}

func (c *Client) reserveRPC(ctx context.Context, id string, o Order) (*Reservation, error) {
	msg := &hongbaov1.ReserveRequest{CampaignId: id, UserId: o.UserID, OrderId: o.OrderID,
		OrderAmount: &hongbaov1.ReserveRequest_OrderAmountCents{OrderAmountCents: o.OrderAmountCents}}
	r, err := unary(ctx, c, c.rpc.discounts.Reserve, msg)
	if err != nil {
		return nil, err
	}
	w, err := word(r.GetOutcome().String(), "RESERVE_OUTCOME_")
	if err != nil {
		return nil, err
	}
	out := &Reservation{Outcome: w, OrderID: r.GetOrderId(), AmountCents: r.GetAmountCents()}
	if r.GetExpiresAt() != nil {
		out.ExpiresAt = r.GetExpiresAt().AsTime()
	}
	return out, nil
}

func (c *Client) orderRPC(ctx context.Context, id string, o OrderRef, confirm bool) (*OrderOutcome, error) {
	var state hongbaov1.OrderState
	var out OrderOutcome
	if confirm {
		r, err := unary(ctx, c, c.rpc.discounts.Confirm, &hongbaov1.ConfirmRequest{CampaignId: id, UserId: o.UserID, OrderId: o.OrderID})
		if err != nil {
			return nil, err
		}
		state, out.OrderID, out.AmountCents = r.GetState(), r.GetOrderId(), r.GetAmountCents()
	} else {
		r, err := unary(ctx, c, c.rpc.discounts.Cancel, &hongbaov1.CancelRequest{CampaignId: id, UserId: o.UserID, OrderId: o.OrderID})
		if err != nil {
			return nil, err
		}
		state, out.OrderID = r.GetState(), r.GetOrderId()
	}
	w, err := word(state.String(), "ORDER_STATE_")
	if err != nil {
		return nil, err
	}
	out.Outcome = w
	return &out, nil
}

// grabBatchRPC is grabBatch over GrabBatch.
func (c *Client) grabBatchRPC(ctx context.Context, campaign string, users []string) ([]gatewayResult, error) {
	r, err := unary(ctx, c, c.rpc.grabs.GrabBatch, &hongbaov1.GrabBatchRequest{CampaignId: campaign, UserIds: users})
	if err != nil {
		return nil, err
	}
	if len(r.GetResults()) != len(users) {
		return nil, fmt.Errorf("hongbao client: GrabBatch: %d results for %d users", len(r.GetResults()), len(users))
	}
	res := make([]gatewayResult, len(users))
	for i, x := range r.GetResults() {
		if x.GetUserId() != users[i] {
			return nil, fmt.Errorf("hongbao client: GrabBatch: result %d is of user %q, not %q", i, x.GetUserId(), users[i])
		}
		res[i] = resultOf(campaign, x)
	}
	return res, nil
}

// resultOf is one user's answer of a batch or a stream, as the JSON
// batch's would be.
func resultOf(campaign string, x *hongbaov1.GrabResult) gatewayResult {
	if x.GetError() != "" {
		e := &Error{Code: x.GetError(), Status: statuses[x.GetError()], Message: "the user's grab was not attempted",
			RetryAfter: wholeSeconds(x.GetRetryAfterMs())}
		return gatewayResult{err: e}
	}
	o, err := word(x.GetOutcome().String(), "GRAB_OUTCOME_")
	if err != nil {
		return gatewayResult{err: err}
	}
	return gatewayResult{grab: &Grab{Campaign: campaign, Outcome: o, PacketID: x.GetPacketId(), AmountCents: x.GetAmountCents()}}
}
