package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// The unary Grab is the hottest procedure: a shopper's click. Over the
// Connect protocol its plain form (POST, application/proto, no
// compression, no timeout header) is answered here, without connect's
// per-call machinery (its protocol negotiation, connection wrappers,
// interceptor chain and header merging), through the same gates,
// operation, metrics, span and error answers as the procedure
// (rpcGrabs.grab; errors encoded by connect's ErrorWriter). Every other
// form, gRPC included, goes to connect's handler.

// grabFast serves the plain Connect form of Grab, and hands any other
// request to next, the GrabService's handler.
type grabFast struct {
	s    *Server
	next http.Handler
	errs *connect.ErrorWriter
	spec connect.Spec
	max  int64
}

func (s *Server) grabFastHandler(next http.Handler) http.Handler {
	return &grabFast{s: s, next: next, errs: connect.NewErrorWriter(), max: max(s.cfg.MaxBodyBytes, maxGrabsBody),
		spec: connect.Spec{Procedure: hongbaov1connect.GrabServiceGrabProcedure, StreamType: connect.StreamTypeUnary}}
}

// plain says whether r is Grab's plain Connect form.
func plainConnectUnary(r *http.Request) bool {
	h := r.Header
	if r.Method != http.MethodPost || len(h["Content-Type"]) != 1 || h["Content-Type"][0] != "application/proto" {
		return false
	}
	if v := h["Content-Encoding"]; len(v) > 0 && (len(v) > 1 || v[0] != "identity") {
		return false
	}
	if v := h["Connect-Protocol-Version"]; len(v) > 0 && (len(v) > 1 || v[0] != "1") {
		return false
	}
	return len(h["Connect-Timeout-Ms"]) == 0
}

// fastBufs recycle the buffers of requests and answers.
var fastBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (g *grabFast) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !plainConnectUnary(r) {
		g.next.ServeHTTP(w, r)
		return
	}
	s := g.s
	peer := connect.Peer{Addr: r.RemoteAddr, Protocol: connect.ProtocolConnect}
	ctx, call := s.observe(r.Context(), g.spec, peer, r.Header)
	var err error
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = s.rpcRecover(ctx, g.spec, r.Header, p)
			_ = g.errs.Write(w, r, err)
		}
		call.end(err)
	}()
	buf := fastBufs.Get().(*bytes.Buffer)
	defer fastBufs.Put(buf)
	buf.Reset()
	var msg hongbaov1.GrabRequest
	err = readMessage(buf, r.Body, g.max)
	if err == nil {
		if uerr := proto.Unmarshal(buf.Bytes(), &msg); uerr != nil {
			err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unmarshal message: %w", uerr))
		}
	}
	var out *hongbaov1.GrabResponse
	if err == nil {
		out, err = rpcGrabs{s}.grab(ctx, g.spec, r.Header, peer, msg.GetCampaignId())
	}
	if err != nil {
		_ = g.errs.Write(w, r, err)
		return
	}
	b, merr := proto.MarshalOptions{}.MarshalAppend(buf.Bytes()[:0], out)
	if merr != nil {
		err = connect.NewError(connect.CodeInternal, merr)
		_ = g.errs.Write(w, r, err)
		return
	}
	h := w.Header()
	h["Content-Type"] = protoContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

var protoContentType = []string{"application/proto"}

// readMessage reads a request's message into buf, refusing one above max
// bytes as connect refuses it.
func readMessage(buf *bytes.Buffer, body io.Reader, max int64) error {
	n, err := buf.ReadFrom(io.LimitReader(body, max+1))
	switch {
	case err != nil:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return connect.NewError(connect.CodeResourceExhausted, err)
		}
		return connect.NewError(connect.CodeUnknown, fmt.Errorf("read message: %w", err))
	case n > max:
		_, _ = io.Copy(io.Discard, body)
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("message is larger than configured max %d", max))
	}
	return nil
}
