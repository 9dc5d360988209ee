package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// TestStatusesCoverSentinels: every code with a sentinel has the status
// its JSON route answers, so a procedure's error gets one.
func TestStatusesCoverSentinels(t *testing.T) {
	for code := range sentinels {
		if statuses[code] == 0 {
			t.Errorf("code %s has no status", code)
		}
	}
}

// TestWords: an enum value's API word is its name after the prefix, in
// lower case; UNSPECIFIED is no answer.
func TestWords(t *testing.T) {
	for _, tc := range []struct{ name, prefix, want string }{
		{hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED.String(), "GRAB_OUTCOME_", AlreadyGranted},
		{hongbaov1.GrabOutcome_GRAB_OUTCOME_SOLD_OUT.String(), "GRAB_OUTCOME_", SoldOut},
		{hongbaov1.ReserveOutcome_RESERVE_OUTCOME_NOT_OPEN.String(), "RESERVE_OUTCOME_", NotOpen},
		{hongbaov1.OrderState_ORDER_STATE_EXPIRED.String(), "ORDER_STATE_", Expired},
	} {
		got, err := word(tc.name, tc.prefix)
		if err != nil || got != tc.want {
			t.Errorf("word(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := word(hongbaov1.GrabOutcome_GRAB_OUTCOME_UNSPECIFIED.String(), "GRAB_OUTCOME_"); err == nil {
		t.Error("UNSPECIFIED is an answer")
	}
	for ms, want := range map[int64]time.Duration{0: 0, 1: time.Second, 1000: time.Second, 1001: 2 * time.Second} {
		if got := wholeSeconds(ms); got != want {
			t.Errorf("wholeSeconds(%d) = %v, want %v", ms, got, want)
		}
	}
}

// fakeRPC answers Grab granted and each grab of a stream granted, a
// packet named after its user.
type fakeRPC struct {
	hongbaov1connect.UnimplementedGrabServiceHandler
}

func (fakeRPC) Grab(_ context.Context, req *connect.Request[hongbaov1.GrabRequest]) (*connect.Response[hongbaov1.GrabResponse], error) {
	id := req.Msg.GetCampaignId()
	return connect.NewResponse(&hongbaov1.GrabResponse{CampaignId: id, Outcome: hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED,
		PacketId: id + "/1", AmountCents: 1}), nil
}

func (fakeRPC) GrabStream(_ context.Context, st *connect.BidiStream[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse]) error {
	for {
		msg, err := st.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out := &hongbaov1.GrabStreamResponse{}
		for _, g := range msg.GetGrabs() {
			out.Results = append(out.Results, &hongbaov1.GrabResult{UserId: g.GetUserId(), Ref: g.GetRef(),
				Outcome: hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, PacketId: "c/" + g.GetUserId(), AmountCents: 1})
		}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// TestDefaultTransport: without an HTTPClient of the caller's, a Connect
// or gRPC client speaks HTTP/2 on an http:// URL (h2c), for a unary call
// and a gateway's stream, which HTTP/1.1 cannot carry.
func TestDefaultTransport(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(hongbaov1connect.NewGrabServiceHandler(fakeRPC{}))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetUnencryptedHTTP2(true) // h2c only: an HTTP/1.1 request fails
	hs.Start()
	defer hs.Close()
	ctx := context.Background()
	for _, p := range []Protocol{Connect, GRPC} {
		c, err := New(hs.URL, Options{Token: "t", Protocol: p})
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.Grab(ctx, "c")
		if err != nil || g.Outcome != Granted || g.PacketID != "c/1" {
			t.Fatalf("%v: %+v, %v", p, g, err)
		}
		gw, err := c.Gateway(GatewayOptions{Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		g, err = gw.Grab(ctx, "c", "u1")
		if err != nil || g.Outcome != Granted || g.PacketID != "c/u1" {
			t.Fatalf("%v stream: %+v, %v", p, g, err)
		}
		if err := gw.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
