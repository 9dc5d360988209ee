package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// The Connect and gRPC procedures (proto/hongbao/v1), on the same mux and
// listener as the JSON routes: the grabs (rpc_grab.go) and the payment
// system's discount calls (rpc_discount.go), with gRPC's health and
// reflection services. A procedure builds an inbound from its request's
// header and peer, goes through the gates of gates.go and calls the
// operations of ops.go and gateway.go, as its JSON route does; a refusal
// or an error is answered from errorCodes' rpc column, with the code of
// the error shape as a hongbaov1.Error detail and Retry-After as a header
// (Connect) or trailer (gRPC). Each procedure is counted and traced under
// its path ("/hongbao.v1.GrabService/Grab") as a JSON route under its
// pattern. The unary Grab's plain Connect form takes a shorter way
// through the same steps (rpc_fast.go).

// rpcRoutes mounts the procedures on the mux.
func (s *Server) rpcRoutes() {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(rpcObserver{s}),
		connect.WithRecover(s.rpcRecover),
		// A message is capped as a JSON body is (Config.MaxBodyBytes).
		connect.WithReadMaxBytes(int(s.cfg.MaxBodyBytes)),
		// Answers of a few dozen bytes (a health check, a discount) cost
		// more CPU to gzip than they save; larger ones still compress for
		// a client that asks.
		connect.WithCompressMinBytes(1024),
	}
	// A batch's message, or a stream's, names up to MaxGrabBatch users, as
	// the JSON batch's body may (maxGrabsBody). The grabs answer
	// uncompressed, as their JSON routes do, even to a client that accepts
	// gzip (connect's clients do by default): a gateway sits next to
	// serve, and gzipping a stream's results took nearly half of the CPU
	// serve spent on the stream. A gzipped request is still read.
	grabOpts := append(slices.Clone(opts), connect.WithReadMaxBytes(int(max(s.cfg.MaxBodyBytes, maxGrabsBody))),
		connect.WithCompressMinBytes(math.MaxInt))
	path, grabs := hongbaov1connect.NewGrabServiceHandler(rpcGrabs{s}, grabOpts...)
	s.mux.Handle(path, streamDeadlines(grabs))
	s.mux.Handle(hongbaov1connect.GrabServiceGrabProcedure, s.grabFastHandler(grabs))
	s.mux.Handle(hongbaov1connect.NewDiscountServiceHandler(rpcDiscounts{s}, opts...))
	s.mux.Handle(grpchealth.NewHandler(rpcHealth{s}, opts...))
	reflector := grpcreflect.NewStaticReflector(RPCServices()...)
	s.mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	s.mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
}

// RPCServices names the Connect and gRPC services the Server answers,
// sorted: the hongbao.v1 services and grpc.health.v1.Health; the
// reflection services describe them.
func RPCServices() []string {
	out := []string{hongbaov1connect.GrabServiceName, hongbaov1connect.DiscountServiceName, grpchealth.HealthV1ServiceName}
	sort.Strings(out)
	return out
}

// admit runs the gates of a JSON route for a procedure: the per-address
// limit, gate (the caller's class) and the global budget, and returns the
// caller. campaign is the campaign a grab names, for the console's live
// counts of refusals.
func (s *Server) admit(ctx context.Context, spec connect.Spec, header http.Header, peer connect.Peer, campaign string,
	gate func(inbound) (string, refusal)) (string, error) {
	in := inbound{ctx: ctx, route: spec.Procedure, campaign: campaign, header: header, peer: peer.Addr}
	if no := s.ipGate(in); no.refused() {
		return "", s.rpcRefusal(no.answer, no.wait)
	}
	who, no := gate(in)
	if !no.refused() {
		no = s.spendGate(in)
	}
	if no.refused() {
		return "", s.rpcRefusal(no.answer, no.wait)
	}
	return who, nil
}

// rpcFail is the error a procedure answers for err: errorTable's answer
// (answerFor), as rpcRefusal encodes it.
func (s *Server) rpcFail(procedure string, err error) error {
	return s.rpcRefusal(s.answerFor(procedure, err), 0)
}

// rpcRefusal encodes a as a Connect error: its code from errorCodes, its
// message, and a hongbaov1.Error detail with the code of the error shape.
// wait, when positive, is the wait asked (a rate limit's); else a's retry
// asks Config.RetryAfter. The wait goes in the detail and as Retry-After
// in whole seconds (at least 1), as the JSON routes send it.
func (s *Server) rpcRefusal(a *requestError, wait time.Duration) error {
	if wait <= 0 && a.retry {
		wait = s.cfg.RetryAfter
	}
	e := connect.NewError(a.rpcCode(), errors.New(a.msg))
	if d, err := connect.NewErrorDetail(&hongbaov1.Error{Code: a.code, RetryAfterMs: wait.Milliseconds()}); err == nil {
		e.AddDetail(d)
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		e.Meta().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	return e
}

// rpcRecover answers a panic in a procedure as the JSON routes answer
// one: logged, and internal.
func (s *Server) rpcRecover(_ context.Context, spec connect.Spec, _ http.Header, p any) error {
	s.log.Error("panic in handler", "route", spec.Procedure, "panic", fmt.Sprint(p))
	return s.rpcRefusal(errInternal, 0)
}

// rpcStatus is the HTTP status a JSON route would have answered for a
// procedure's error, for the request metrics and spans: 200 without one;
// the status of the error's code (its hongbaov1.Error detail); for an
// error of Connect's own (a message that did not decode, an unknown
// method), the status of the first code of errorCodes with its rpc code.
func rpcStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	ce := new(connect.Error)
	if !errors.As(err, &ce) {
		if a := answerOf(err); a != nil {
			return a.httpStatus()
		}
		return http.StatusInternalServerError
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if e, ok := v.(*hongbaov1.Error); ok {
				return (&requestError{code: e.Code}).httpStatus()
			}
		}
	}
	switch ce.Code() {
	case connect.CodeUnimplemented:
		return errNoRoute.httpStatus()
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return answerOf(context.Canceled).httpStatus()
	}
	return rpcCodeStatus[ce.Code()]
}

// rpcCodeStatus is, for each rpc code of errorCodes, the HTTP status of
// the first error code (in their sorted order) that has it.
var rpcCodeStatus = func() map[connect.Code]int {
	words := make([]string, 0, len(errorCodes))
	for w := range errorCodes {
		words = append(words, w)
	}
	sort.Strings(words)
	out := map[connect.Code]int{}
	for _, w := range words {
		if _, ok := out[errorCodes[w].rpc]; !ok {
			out[errorCodes[w].rpc] = errorCodes[w].http
		}
	}
	return out
}()

// rpcObserver counts each procedure's calls and latency under its path,
// with the status a JSON route would have answered (rpcStatus), and
// records its server span when the Server traces.
type rpcObserver struct{ s *Server }

func (o rpcObserver) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, call := o.s.observe(ctx, req.Spec(), req.Peer(), req.Header())
		res, err := next(ctx, req)
		call.end(err)
		return res, err
	}
}

func (o rpcObserver) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (o rpcObserver) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, call := o.s.observe(ctx, conn.Spec(), conn.Peer(), conn.RequestHeader())
		err := next(ctx, conn)
		call.end(err)
		return err
	}
}

// rpcCall is a procedure's call being observed: end counts it and ends
// its span. A value, not a closure, so that observing a call allocates
// nothing when the Server does not trace.
type rpcCall struct {
	s     *Server
	route string
	start time.Time
	span  trace.Span
}

// observe starts a procedure's span, continuing the caller's traceparent,
// and returns the call, which ends it and counts it.
func (s *Server) observe(ctx context.Context, spec connect.Spec, peer connect.Peer, header http.Header) (context.Context, rpcCall) {
	start := time.Now()
	route := spec.Procedure
	var span trace.Span
	if s.cfg.Tracer != nil {
		service, method, _ := strings.Cut(strings.TrimPrefix(route, "/"), "/")
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(header))
		ctx, span = s.cfg.Tracer.Start(ctx, route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("rpc.system", rpcSystem(peer.Protocol)), attribute.String("rpc.service", service),
			attribute.String("rpc.method", method)))
	}
	return ctx, rpcCall{s: s, route: route, start: start, span: span}
}

// end counts the call with the status a JSON route would have answered
// for err, and ends its span.
func (c rpcCall) end(err error) {
	code := rpcStatus(err)
	c.s.count(c.route, code, c.start)
	if c.span == nil {
		return
	}
	c.span.SetAttributes(attribute.String("rpc.response.status_code", rpcCodeName(err)),
		attribute.Int("http.response.status_code", code))
	if code >= 500 {
		c.span.SetStatus(codes.Error, http.StatusText(code))
	}
	c.span.End()
}

// rpcSystem names the protocol of a call as OpenTelemetry's rpc.system
// does.
func rpcSystem(protocol string) string {
	if protocol == connect.ProtocolConnect {
		return "connect_rpc"
	}
	return protocol // "grpc", "grpcweb"
}

// rpcCodeName is the status code of a procedure's answer: "ok", or its
// error's ("not_found", "unavailable", ...).
func rpcCodeName(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

// streamDeadlines lifts the server's read and write timeouts (serve's
// http.Server has them, meant for one request) off the gateways' grab
// streams, which live as long as their gateway keeps them, and hands the
// stream its ResponseController, with which it ends its read when the
// Server stops (rpc_grab.go).
func streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == hongbaov1connect.GrabServiceGrabStreamProcedure {
			rc := http.NewResponseController(w)
			// Errors: a connection that cannot take deadlines (HTTP/1,
			// where Connect has no bidirectional stream) keeps its own.
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
			r = r.WithContext(context.WithValue(r.Context(), streamControlKey{}, rc))
		}
		next.ServeHTTP(w, r)
	})
}

// streamControlKey is the context key of a stream's ResponseController.
type streamControlKey struct{}

// rpcHealth answers grpc.health.v1.Health as /readyz answers: SERVING
// when ready, NOT_SERVING when a readiness check fails or the server is
// stopping; for the whole server ("") and each of its services.
type rpcHealth struct{ s *Server }

func (h rpcHealth) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	known := req.Service == ""
	for _, name := range RPCServices() {
		known = known || req.Service == name
	}
	if !known {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	if h.s.stopping.Load() || len(h.s.readiness().failed) > 0 {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
