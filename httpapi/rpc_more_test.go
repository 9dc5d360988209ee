package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// TestRPCDiscount: Reserve, Confirm and Cancel under the payment key
// answer as their JSON routes, to the field: reserved, its repeat already
// (decimal or cents), confirmed (again), cancelled or expired, and the
// refusals with their codes (confirmed, cancelled, no_reservation); a
// user's token is PERMISSION_DENIED.
func TestRPCDiscount(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	for _, p := range rpcProtocols {
		t.Run(p, func(t *testing.T) {
			c := ts.rpc(t, p)
			ctx := context.Background()
			pay := string(paymentKey)
			id := ts.createDiscount(t, `{"budget":"100.00","quota":50,"min":"0.01","max":"5.00","per_user_count":3,"hold":"30s"}`)
			reserve := func(user, order string, amount any) (*hongbaov1.ReserveResponse, error) {
				m := &hongbaov1.ReserveRequest{CampaignId: id, UserId: user, OrderId: order}
				switch a := amount.(type) {
				case int64:
					m.OrderAmount = &hongbaov1.ReserveRequest_OrderAmountCents{OrderAmountCents: a}
				case string:
					m.OrderAmount = &hongbaov1.ReserveRequest_OrderAmountDecimal{OrderAmountDecimal: a}
				}
				res, err := c.discounts.Reserve(ctx, authed(m, pay))
				if err != nil {
					return nil, err
				}
				return res.Msg, nil
			}
			r1, err := reserve("alice", "o-1", int64(3520))
			require.NoError(t, err)
			require.Equal(t, hongbaov1.ReserveOutcome_RESERVE_OUTCOME_RESERVED, r1.Outcome)
			require.Equal(t, "o-1", r1.OrderId)
			require.True(t, r1.AmountCents >= 1 && r1.AmountCents <= 500, "%d", r1.AmountCents)
			require.Equal(t, hongbao.FormatCents(r1.AmountCents), r1.Amount)
			require.WithinDuration(t, time.Now().Add(30*time.Second), r1.ExpiresAt.AsTime(), 5*time.Second)
			again, err := reserve("alice", "o-1", "35.20")
			require.NoError(t, err)
			require.Equal(t, hongbaov1.ReserveOutcome_RESERVE_OUTCOME_ALREADY, again.Outcome)
			require.Equal(t, r1.AmountCents, again.AmountCents)
			// The JSON route agrees, to the field.
			r := ts.do(t, "POST", "/v1/discounts/"+id+"/reserve", pay, `{"user_id":"alice","order_id":"o-1","order_amount_cents":3520}`)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			js := r.json(t)
			exp, err := time.Parse(time.RFC3339Nano, js["expires_at"].(string))
			require.NoError(t, err)
			require.True(t, exp.Equal(r1.ExpiresAt.AsTime()), "%v %v", exp, r1.ExpiresAt.AsTime())
			require.Equal(t, map[string]any{"outcome": "already", "order_id": "o-1", "amount": r1.Amount,
				"amount_cents": float64(r1.AmountCents), "expires_at": js["expires_at"]}, js)

			_, err = reserve("alice", "o-1", "35.2x")
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
			_, err = reserve("alice", "o-x", nil)
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
			_, err = reserve("", "o-x", int64(100))
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
			_, err = c.discounts.Reserve(ctx, authed(&hongbaov1.ReserveRequest{CampaignId: id, UserId: "alice", OrderId: "o-9",
				OrderAmount: &hongbaov1.ReserveRequest_OrderAmountCents{OrderAmountCents: 100}}, token(t, "alice")))
			requireRPCError(t, err, connect.CodePermissionDenied, httpapi.CodeForbidden)

			order := func(user, o string) (*hongbaov1.ConfirmResponse, *hongbaov1.CancelResponse, error, error) {
				conf, cerr := c.discounts.Confirm(ctx, authed(&hongbaov1.ConfirmRequest{CampaignId: id, UserId: user, OrderId: o}, pay))
				canc, xerr := c.discounts.Cancel(ctx, authed(&hongbaov1.CancelRequest{CampaignId: id, UserId: user, OrderId: o}, pay))
				var cm *hongbaov1.ConfirmResponse
				var xm *hongbaov1.CancelResponse
				if cerr == nil {
					cm = conf.Msg
				}
				if xerr == nil {
					xm = canc.Msg
				}
				return cm, xm, cerr, xerr
			}
			conf, _, cerr, xerr := order("alice", "o-1")
			require.NoError(t, cerr)
			require.Equal(t, hongbaov1.OrderState_ORDER_STATE_CONFIRMED, conf.State)
			require.Equal(t, r1.AmountCents, conf.AmountCents)
			require.Equal(t, r1.Amount, conf.Amount)
			requireRPCError(t, xerr, connect.CodeFailedPrecondition, httpapi.CodeConfirmed)
			r = ts.do(t, "POST", "/v1/discounts/"+id+"/orders/o-1/confirm", pay, `{"user_id":"alice"}`)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			require.Equal(t, map[string]any{"outcome": "confirmed", "order_id": "o-1", "amount": conf.Amount,
				"amount_cents": float64(conf.AmountCents)}, r.json(t))

			_, err = reserve("bob", "o-2", int64(1000))
			require.NoError(t, err)
			canc, err := c.discounts.Cancel(ctx, authed(&hongbaov1.CancelRequest{CampaignId: id, UserId: "bob", OrderId: "o-2"}, pay))
			require.NoError(t, err)
			require.Equal(t, hongbaov1.OrderState_ORDER_STATE_CANCELLED, canc.Msg.State)
			require.Equal(t, "o-2", canc.Msg.OrderId)
			_, canc2, cerr, xerr := order("bob", "o-2")
			requireRPCError(t, cerr, connect.CodeFailedPrecondition, httpapi.CodeCancelled)
			require.NoError(t, xerr, "a repeated cancel")
			require.Equal(t, hongbaov1.OrderState_ORDER_STATE_CANCELLED, canc2.State)

			_, _, cerr, xerr = order("bob", "o-none")
			requireRPCError(t, cerr, connect.CodeNotFound, httpapi.CodeNoReservation)
			requireRPCError(t, xerr, connect.CodeNotFound, httpapi.CodeNoReservation)
			_, _, cerr, _ = order("bob", "bad order")
			requireRPCError(t, cerr, connect.CodeInvalidArgument, httpapi.CodeInvalidID)
		})
	}
}

// TestRPCHealth: grpc.health.v1 answers SERVING while /readyz is ready,
// NOT_SERVING while a readiness check fails and once the server stops,
// for the server and each service; an unknown service is NOT_FOUND.
func TestRPCHealth(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Ready = map[string]func(context.Context) error{"probe": func(context.Context) error {
			if down.Load() {
				return errors.New("probe down")
			}
			return nil
		}}
	})
	for _, p := range rpcProtocols {
		c := ts.rpc(t, p)
		hc := grpchealth.NewClient(c.http, ts.URL, c.opts...)
		status := func(service string) grpchealth.Status {
			res, err := hc.Check(context.Background(), &grpchealth.CheckRequest{Service: service})
			require.NoError(t, err, "%s %q", p, service)
			return res.Status
		}
		for _, svc := range append([]string{""}, httpapi.RPCServices()...) {
			require.Equal(t, grpchealth.StatusServing, status(svc), "%s %q", p, svc)
		}
		_, err := hc.Check(context.Background(), &grpchealth.CheckRequest{Service: "no.such.Service"})
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%s: %v", p, err)
	}
	c := ts.rpc(t, "grpc")
	hc := grpchealth.NewClient(c.http, ts.URL, c.opts...)
	down.Store(true)
	require.Eventually(t, func() bool {
		res, err := hc.Check(context.Background(), &grpchealth.CheckRequest{})
		return err == nil && res.Status == grpchealth.StatusNotServing
	}, 10*time.Second, 50*time.Millisecond, "NOT_SERVING while a readiness check fails")
	r := ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "/readyz agrees")
	down.Store(false)
	require.Eventually(t, func() bool {
		res, err := hc.Check(context.Background(), &grpchealth.CheckRequest{})
		return err == nil && res.Status == grpchealth.StatusServing
	}, 10*time.Second, 50*time.Millisecond, "SERVING again")
	ts.Server.Stopping()
	res, err := hc.Check(context.Background(), &grpchealth.CheckRequest{Service: "hongbao.v1.GrabService"})
	require.NoError(t, err)
	require.Equal(t, grpchealth.StatusNotServing, res.Status, "a stopping server")
}

// TestRPCReflection: server reflection, v1 and v1alpha, lists the
// services and describes them from the generated descriptors.
func TestRPCReflection(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	c := ts.rpc(t, "grpc")
	for _, version := range []string{"v1", "v1alpha"} {
		hc := c.http
		if version == "v1alpha" {
			// The client tries v1 first: send its calls to v1alpha.
			hc = &http.Client{Transport: openapitest.Transport(t, alphaReflection{c.http.Transport})}
		}
		rc := grpcreflect.NewClient(hc, ts.URL, c.opts...)
		st := rc.NewStream(context.Background())
		names, err := st.ListServices()
		require.NoError(t, err, version)
		var got []string
		for _, n := range names {
			got = append(got, string(n))
		}
		require.Subset(t, got, httpapi.RPCServices(), version)
		files, err := st.FileContainingSymbol(protoreflect.FullName("hongbao.v1.GrabService"))
		require.NoError(t, err, version)
		require.NotEmpty(t, files)
		require.Equal(t, "hongbao/v1/grab.proto", files[0].GetName())
		var methods []string
		for _, m := range files[0].GetService()[0].GetMethod() {
			methods = append(methods, m.GetName())
		}
		require.Equal(t, []string{"Grab", "GrabBatch", "GrabStream"}, methods)
		_, err = st.Close()
		require.NoError(t, err)
	}
}

// alphaReflection sends the v1 reflection calls to the v1alpha service
// (its messages are the same on the wire).
type alphaReflection struct{ next http.RoundTripper }

func (a alphaReflection) RoundTrip(req *http.Request) (*http.Response, error) {
	const v1, alpha = "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"
	if strings.HasPrefix(req.URL.Path, v1) {
		req = req.Clone(req.Context())
		req.URL.Path = alpha + strings.TrimPrefix(req.URL.Path, v1)
	}
	return a.next.RoundTrip(req)
}

// TestRPCCountedAndTraced: a procedure is counted under its path with the
// status its JSON route would have answered, and traced as a server span
// that continues the caller's traceparent.
func TestRPCCountedAndTraced(t *testing.T) {
	t.Parallel()
	ts, rec, _ := tracedServer(t, hongbao.Config{})
	id := ts.create(t, `{"total_cents":300,"count":3}`)
	c := ts.rpc(t, "grpc")
	req := authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, "tina"))
	req.Header().Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	_, err := c.grabs.Grab(context.Background(), req)
	require.NoError(t, err)
	_, err = c.grabs.Grab(context.Background(), authed(&hongbaov1.GrabRequest{CampaignId: "nope"}, token(t, "tina")))
	requireRPCError(t, err, connect.CodeNotFound, httpapi.CodeNotFound)

	const route = "/hongbao.v1.GrabService/Grab"
	spans := spansNamed(rec, route)
	require.Len(t, spans, 2)
	srv := spans[0]
	require.Equal(t, callerTrace, srv.SpanContext().TraceID().String())
	require.Equal(t, callerSpan, srv.Parent().SpanID().String())
	require.Equal(t, trace.SpanKindServer, srv.SpanKind())
	require.Equal(t, "grpc", attr(srv, "rpc.system").AsString())
	require.Equal(t, "hongbao.v1.GrabService", attr(srv, "rpc.service").AsString())
	require.Equal(t, "Grab", attr(srv, "rpc.method").AsString())
	require.Equal(t, "ok", attr(srv, "rpc.response.status_code").AsString())
	require.EqualValues(t, 200, attr(srv, "http.response.status_code").AsInt64())
	require.Equal(t, "not_found", attr(spans[1], "rpc.response.status_code").AsString())
	require.EqualValues(t, 404, attr(spans[1], "http.response.status_code").AsInt64())
	waits := spansNamed(rec, "hongbao.coalesce.wait")
	require.NotEmpty(t, waits)
	require.Equal(t, srv.SpanContext().SpanID(), waits[0].Parent().SpanID(), "the engine's span is the procedure's child")

	m := ts.metrics(t)
	require.Contains(t, m, `hongbao_http_requests_total{code="200",route="`+route+`"} 1`)
	require.Contains(t, m, `hongbao_http_requests_total{code="404",route="`+route+`"} 1`)
	require.Contains(t, m, `hongbao_http_request_duration_seconds_count{route="`+route+`"} 2`)
}

// TestRPCOutcomeEnums: the proto's outcome enums mirror the outcome
// table: one value per row of its call, numbered by the row's code and
// named by its API word, and nothing else but UNSPECIFIED.
func TestRPCOutcomeEnums(t *testing.T) {
	t.Parallel()
	for _, e := range []struct {
		call   hongbao.OutcomeCall
		desc   protoreflect.EnumDescriptor
		prefix string
	}{
		{hongbao.CallGrab, hongbaov1.GrabOutcome(0).Descriptor(), "GRAB_OUTCOME_"},
		{hongbao.CallReserve, hongbaov1.ReserveOutcome(0).Descriptor(), "RESERVE_OUTCOME_"},
	} {
		want := map[protoreflect.EnumNumber]string{0: e.prefix + "UNSPECIFIED"}
		for _, r := range hongbao.OutcomeTable() {
			if r.Call == e.call {
				want[protoreflect.EnumNumber(r.Code)] = e.prefix + strings.ToUpper(r.Word)
			}
		}
		got := map[protoreflect.EnumNumber]string{}
		for i := 0; i < e.desc.Values().Len(); i++ {
			v := e.desc.Values().Get(i)
			got[v.Number()] = string(v.Name())
		}
		require.Equal(t, want, got, "%s", e.desc.FullName())
	}
}
