package httpapi_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// rpcConn is the generated clients of the Connect and gRPC procedures,
// over one protocol, against a test server's real listener.
type rpcConn struct {
	name      string
	grabs     hongbaov1connect.GrabServiceClient
	discounts hongbaov1connect.DiscountServiceClient
	http      *http.Client
	opts      []connect.ClientOption
}

// rpcProtocols are the ways a client reaches the procedures: the Connect
// protocol over HTTP/1.1 and over h2c, and gRPC over h2c.
var rpcProtocols = []string{"connect", "connect-h2c", "grpc"}

// rpc returns the clients of protocol (one of rpcProtocols). The replies
// are typed: the generated code decodes them against the proto, and the
// JSON replies of the same client are checked against openapi.json.
func (ts *testServer) rpc(t testing.TB, protocol string) rpcConn {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	if protocol != "connect" {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: openapitest.Transport(t, tr)}
	var opts []connect.ClientOption
	if protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return rpcConn{
		name: protocol, http: hc, opts: opts,
		grabs:     hongbaov1connect.NewGrabServiceClient(hc, ts.URL, opts...),
		discounts: hongbaov1connect.NewDiscountServiceClient(hc, ts.URL, opts...),
	}
}

// authed is a request for msg with a bearer credential.
func authed[T any](msg *T, credential string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if credential != "" {
		req.Header().Set("Authorization", "Bearer "+credential)
	}
	return req
}

// requireRPCError checks that err is a Connect error of code whose
// hongbaov1.Error detail names apiCode, the JSON route's error code, and
// returns it.
func requireRPCError(t testing.TB, err error, code connect.Code, apiCode string) *connect.Error {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, code, ce.Code(), "%v", err)
	require.NotEmpty(t, ce.Message())
	var got []string
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if e, ok := v.(*hongbaov1.Error); ok {
			got = append(got, e.Code)
		}
	}
	require.Equal(t, []string{apiCode}, got, "the error's hongbaov1.Error detail")
	return ce
}

// TestRPCGrab: the unary Grab over each protocol answers as the JSON
// route: granted, the same packet already_granted on a retry (and on the
// JSON route), sold_out, closed; not_found, invalid_id and the
// credentials as errors with their mapped codes.
func TestRPCGrab(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	for _, p := range rpcProtocols {
		t.Run(p, func(t *testing.T) {
			c := ts.rpc(t, p)
			ctx := context.Background()
			id := ts.create(t, `{"total":"10.00","count":2,"min":"0.01"}`)
			grab := func(user string) (*hongbaov1.GrabResponse, error) {
				res, err := c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
				if err != nil {
					return nil, err
				}
				return res.Msg, nil
			}
			first, err := grab("ann")
			require.NoError(t, err)
			require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, first.Outcome)
			require.Equal(t, id, first.CampaignId)
			require.True(t, strings.HasPrefix(first.PacketId, id+"/"), first.PacketId)
			require.Equal(t, hongbao.FormatCents(first.AmountCents), first.Amount)

			again, err := grab("ann")
			require.NoError(t, err)
			require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, again.Outcome)
			require.Equal(t, first.PacketId, again.PacketId)
			require.Equal(t, first.AmountCents, again.AmountCents)
			// The JSON route agrees, to the field.
			r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "ann"), "")
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			require.Equal(t, map[string]any{"campaign": id, "outcome": "already_granted", "packet_id": first.PacketId,
				"amount": first.Amount, "amount_cents": float64(first.AmountCents)}, r.json(t))

			second, err := grab("bob")
			require.NoError(t, err)
			require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, second.Outcome)
			require.EqualValues(t, 1000, first.AmountCents+second.AmountCents)
			out, err := grab("cy")
			require.NoError(t, err)
			require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_SOLD_OUT, out.Outcome)
			require.Empty(t, out.PacketId)
			require.Zero(t, out.AmountCents)

			closed := ts.create(t, `{"total":"10.00","count":2}`)
			r = ts.do(t, "POST", "/v1/campaigns/"+closed+"/close", string(adminKey), "")
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			res, err := c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: closed}, token(t, "ann")))
			require.NoError(t, err)
			require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_CLOSED, res.Msg.Outcome)

			_, err = c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: "no-such-" + p}, token(t, "ann")))
			requireRPCError(t, err, connect.CodeNotFound, httpapi.CodeNotFound)
			_, err = c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: "bad id"}, token(t, "ann")))
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidID)
			_, err = c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, ""))
			requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)
			_, err = c.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, string(adminKey)))
			requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)
		})
	}
}

// TestRPCRateLimited: the per-user limit refuses a grab with
// RESOURCE_EXHAUSTED, rate_limited, and Retry-After as the JSON route
// sends it (a header with Connect, a trailer with gRPC).
func TestRPCRateLimited(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate, c.UserBurst = 0.01, 1 })
	id := ts.create(t, `{"total":"10.00","count":10}`)
	for _, p := range rpcProtocols {
		c := ts.rpc(t, p)
		user := "limited-" + p
		_, err := c.grabs.Grab(context.Background(), authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
		require.NoError(t, err, p)
		_, err = c.grabs.Grab(context.Background(), authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
		ce := requireRPCError(t, err, connect.CodeResourceExhausted, httpapi.CodeRateLimited)
		require.NotEmpty(t, ce.Meta().Get("Retry-After"), "%s: %v", p, ce.Meta())
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, user), "")
		require.Equal(t, http.StatusTooManyRequests, r.Status)
		require.Equal(t, r.Header.Get("Retry-After"), ce.Meta().Get("Retry-After"), p)
	}
}

// TestRPCGrabBatch: GrabBatch keeps the order, answers a repeat
// already_granted with the same packet, refuses 1001 ids as the JSON
// route refuses them (invalid_request), and a user token
// (PERMISSION_DENIED); the JSON batch then answers the same packets.
func TestRPCGrabBatch(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	for _, p := range rpcProtocols {
		t.Run(p, func(t *testing.T) {
			c := ts.rpc(t, p)
			ctx := context.Background()
			id := ts.create(t, `{"total":"10.00","count":3,"min":"0.01"}`)
			users := []string{"u-1", "u-2", "u-3", "u-4", "u-2", "u-5"}
			res, err := c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: users}, string(gatewayKey)))
			require.NoError(t, err)
			got := res.Msg.Results
			require.Len(t, got, len(users))
			var granted int
			var cents int64
			for i, r := range got {
				require.Equal(t, users[i], r.UserId, "result %d", i)
				require.Empty(t, r.Error)
				require.Zero(t, r.Ref)
				if r.Outcome == hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED {
					granted++
					cents += r.AmountCents
				}
			}
			require.Equal(t, 3, granted)
			require.EqualValues(t, 1000, cents)
			if got[1].Outcome == hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED {
				require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, got[4].Outcome)
				require.Equal(t, got[1].PacketId, got[4].PacketId)
			} else {
				require.Equal(t, got[1].Outcome, got[4].Outcome)
			}
			// The JSON batch of the same users, now: what a retry answers.
			requireSameAsJSON(t, ts, id, got)

			many := make([]string, httpapi.MaxGrabBatch+1)
			for i := range many {
				many[i] = fmt.Sprintf("m-%d", i)
			}
			_, err = c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: many}, string(gatewayKey)))
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
			r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(many))
			require.Equal(t, http.StatusBadRequest, r.Status)
			require.Equal(t, httpapi.CodeInvalidRequest, r.errorCode(t))
			_, err = c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{"ok", "b b"}}, string(gatewayKey)))
			requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
			_, err = c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{"u-9"}}, token(t, "u-9")))
			requireRPCError(t, err, connect.CodePermissionDenied, httpapi.CodeForbidden)
			_, err = c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{"u-9"}}, ""))
			requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)
			_, err = c.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: "nope-" + p, UserIds: []string{"u-9"}}, string(gatewayKey)))
			requireRPCError(t, err, connect.CodeNotFound, httpapi.CodeNotFound)
		})
	}
}

// requireSameAsJSON checks results of the procedures against the JSON
// batch of the same users, sent now: each user granted answers
// already_granted with the same packet, each other user the same outcome.
func requireSameAsJSON(t *testing.T, ts *testServer, id string, results []*hongbaov1.GrabResult) {
	t.Helper()
	users := make([]string, len(results))
	for i, r := range results {
		users[i] = r.UserId
	}
	js := ts.grabs(t, id, users)
	require.Len(t, js, len(results))
	for i, r := range results {
		j := js[i]
		require.Equal(t, r.UserId, j.UserID)
		require.Empty(t, j.Error)
		want := strings.ToLower(strings.TrimPrefix(r.Outcome.String(), "GRAB_OUTCOME_"))
		if r.Outcome == hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED {
			want = "already_granted"
		}
		require.Equal(t, want, j.Outcome, "user %s", r.UserId)
		require.Equal(t, r.PacketId, j.PacketID, "user %s", r.UserId)
		require.Equal(t, r.AmountCents, j.AmountCents, "user %s", r.UserId)
		require.Equal(t, r.Amount, j.Amount, "user %s", r.UserId)
	}
}

// TestRPCGrabStream: a gateway's stream over HTTP/2 (gRPC and Connect):
// many users in several messages, read while more are sent; every grab
// answered once, naming its user and ref; the grants share the pool to
// the cent; the JSON batch of the same users then agrees; closing the
// sending side ends the stream cleanly.
func TestRPCGrabStream(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	for _, p := range []string{"grpc", "connect-h2c"} {
		t.Run(p, func(t *testing.T) {
			c := ts.rpc(t, p)
			id := ts.create(t, `{"total":"50.00","count":40,"min":"0.01"}`)
			st := c.grabs.GrabStream(streamContext(t))
			st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
			const messages, per = 6, 15
			sent := map[uint64]string{}
			sendErr := make(chan error, 1)
			go func() {
				var err error
				for m := 0; m < messages && err == nil; m++ {
					req := &hongbaov1.GrabStreamRequest{}
					if m == 0 {
						req.CampaignId = id
					}
					for k := 0; k < per; k++ {
						ref := uint64(m*per + k + 1)
						// Users repeat across messages: u-0..u-59 and
						// again u-0..u-29.
						req.Grabs = append(req.Grabs, &hongbaov1.StreamGrab{UserId: fmt.Sprintf("u-%d", (ref-1)%60), Ref: ref})
					}
					err = st.Send(req)
				}
				if err == nil {
					err = st.CloseRequest()
				}
				sendErr <- err
			}()
			for ref := uint64(1); ref <= messages*per; ref++ {
				sent[ref] = fmt.Sprintf("u-%d", (ref-1)%60)
			}
			got := map[uint64]*hongbaov1.GrabResult{}
			for {
				res, err := st.Receive()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				require.NotEmpty(t, res.Results)
				for _, r := range res.Results {
					require.NotContains(t, got, r.Ref, "ref %d answered twice", r.Ref)
					require.Equal(t, sent[r.Ref], r.UserId, "ref %d", r.Ref)
					require.Empty(t, r.Error, "ref %d", r.Ref)
					got[r.Ref] = r
				}
			}
			require.NoError(t, <-sendErr)
			require.NoError(t, st.CloseResponse())
			require.Len(t, got, messages*per, "every grab answered")

			byUser := map[string]*hongbaov1.GrabResult{}
			var granted int
			var cents int64
			for ref := uint64(1); ref <= messages*per; ref++ {
				r := got[ref]
				switch r.Outcome {
				case hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED:
					require.NotContains(t, byUser, r.UserId, "a user granted twice")
					granted++
					cents += r.AmountCents
					byUser[r.UserId] = r
				case hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED:
					// Its first grab may be answered in a later batch than
					// this one only if both were in flight together; either
					// way the packet is the user's one.
				case hongbaov1.GrabOutcome_GRAB_OUTCOME_SOLD_OUT:
				default:
					t.Fatalf("ref %d: outcome %v", ref, r.Outcome)
				}
			}
			require.Equal(t, 40, granted)
			require.EqualValues(t, 5000, cents)
			for ref := uint64(1); ref <= messages*per; ref++ {
				if r := got[ref]; r.Outcome == hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED {
					require.Equal(t, byUser[r.UserId].PacketId, r.PacketId, "ref %d", ref)
				}
			}
			first := make([]*hongbaov1.GrabResult, 0, 60)
			for ref := uint64(1); ref <= 60; ref++ {
				r := got[ref]
				if g, ok := byUser[r.UserId]; ok {
					r = g
				}
				first = append(first, r)
			}
			requireSameAsJSON(t, ts, id, first)
		})
	}
}

// TestRPCGrabStreamRefused: a stream under a user token is refused
// (PERMISSION_DENIED), a first message without a campaign ends the
// stream (INVALID_ARGUMENT), as does a message of 1001 grabs; a bad user
// id is answered alone, with invalid_request.
func TestRPCGrabStreamRefused(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	c := ts.rpc(t, "grpc")
	id := ts.create(t, `{"total":"10.00","count":10}`)
	open := func(credential string, msgs ...*hongbaov1.GrabStreamRequest) ([]*hongbaov1.GrabResult, error) {
		st := c.grabs.GrabStream(streamContext(t))
		st.RequestHeader().Set("Authorization", "Bearer "+credential)
		for _, m := range msgs {
			if err := st.Send(m); err != nil {
				break // the server ended the stream: its answer is Receive's
			}
		}
		_ = st.CloseRequest()
		var out []*hongbaov1.GrabResult
		for {
			res, err := st.Receive()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, res.Results...)
		}
	}
	one := &hongbaov1.GrabStreamRequest{CampaignId: id, Grabs: []*hongbaov1.StreamGrab{{UserId: "ann", Ref: 1}}}
	_, err := open(token(t, "ann"), one)
	requireRPCError(t, err, connect.CodePermissionDenied, httpapi.CodeForbidden)
	_, err = open("", one)
	requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)

	_, err = open(string(gatewayKey), &hongbaov1.GrabStreamRequest{Grabs: one.Grabs})
	requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
	big := &hongbaov1.GrabStreamRequest{CampaignId: id}
	for i := 0; i <= httpapi.MaxGrabBatch; i++ {
		big.Grabs = append(big.Grabs, &hongbaov1.StreamGrab{UserId: fmt.Sprintf("b-%d", i)})
	}
	_, err = open(string(gatewayKey), big)
	requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
	other := &hongbaov1.GrabStreamRequest{CampaignId: "other", Grabs: one.Grabs}
	res, err := open(string(gatewayKey), one, other)
	requireRPCError(t, err, connect.CodeInvalidArgument, httpapi.CodeInvalidRequest)
	require.Len(t, res, 1, "what was read before is answered")
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, res[0].Outcome)

	mixed := &hongbaov1.GrabStreamRequest{CampaignId: id, Grabs: []*hongbaov1.StreamGrab{{UserId: "b b", Ref: 7}, {UserId: "bob", Ref: 8}}}
	res, err = open(string(gatewayKey), mixed)
	require.NoError(t, err)
	require.Len(t, res, 2)
	byRef := map[uint64]*hongbaov1.GrabResult{}
	for _, r := range res {
		byRef[r.Ref] = r
	}
	require.Equal(t, httpapi.CodeInvalidRequest, byRef[7].Error)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, byRef[8].Outcome)

	// An unknown campaign: each grab answered not_found, the stream goes on.
	res, err = open(string(gatewayKey), &hongbaov1.GrabStreamRequest{CampaignId: "nope", Grabs: one.Grabs})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, httpapi.CodeNotFound, res[0].Error)
}

// TestRPCGrabStreamStops: when the server stops, an open stream answers
// what it read and ends with UNAVAILABLE (not_ready), so a gateway moves
// to another instance; a shutdown does not wait on it.
func TestRPCGrabStreamStops(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	c := ts.rpc(t, "grpc")
	id := ts.create(t, `{"total":"10.00","count":10}`)
	st := c.grabs.GrabStream(streamContext(t))
	st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
	require.NoError(t, st.Send(&hongbaov1.GrabStreamRequest{CampaignId: id, Grabs: []*hongbaov1.StreamGrab{{UserId: "ann", Ref: 1}}}))
	res, err := st.Receive()
	require.NoError(t, err)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, res.Results[0].Outcome)
	ts.Server.Stopping()
	done := make(chan error, 1)
	go func() {
		_, err := st.Receive()
		done <- err
	}()
	select {
	case err := <-done:
		requireRPCError(t, err, connect.CodeUnavailable, httpapi.CodeNotReady)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the server stopped")
	}
	_ = st.CloseRequest()
	_ = st.CloseResponse()
}

// TestRPCGrabStreamLimited: each message after the first spends the
// per-address limit, as a batch request would; a message past it is
// answered rate_limited, grab by grab, with the wait, and the stream goes
// on.
func TestRPCGrabStreamLimited(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.GatewayKeys, c.UserRate, c.IPRate, c.IPBurst = [][]byte{gatewayKey}, -1, 0.01, 3
	})
	id := ts.create(t, `{"total":"10.00","count":10}`)
	st := ts.rpc(t, "grpc").grabs.GrabStream(streamContext(t))
	st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
	results := func(m *hongbaov1.GrabStreamRequest) []*hongbaov1.GrabResult {
		t.Helper()
		require.NoError(t, st.Send(m))
		res, err := st.Receive()
		require.NoError(t, err)
		return res.Results
	}
	// The create spent one request of the burst of 3, the stream's
	// opening one, its first message none, the second the last.
	r := results(&hongbaov1.GrabStreamRequest{CampaignId: id, Grabs: []*hongbaov1.StreamGrab{{UserId: "ann", Ref: 1}}})
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, r[0].Outcome)
	r = results(&hongbaov1.GrabStreamRequest{Grabs: []*hongbaov1.StreamGrab{{UserId: "bob", Ref: 2}}})
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, r[0].Outcome)
	r = results(&hongbaov1.GrabStreamRequest{Grabs: []*hongbaov1.StreamGrab{{UserId: "cy", Ref: 3}, {UserId: "dee", Ref: 4}}})
	require.Len(t, r, 2)
	for i, want := range []string{"cy", "dee"} {
		require.Equal(t, want, r[i].UserId)
		require.Equal(t, httpapi.CodeRateLimited, r[i].Error)
		require.Positive(t, r[i].RetryAfterMs)
		require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_UNSPECIFIED, r[i].Outcome)
	}
	require.NoError(t, st.CloseRequest())
	_, err := st.Receive()
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, st.CloseResponse())
	_, err = ts.Engine.Held(context.Background(), id, "cy")
	require.ErrorIs(t, err, hongbao.ErrNoGrant, "a refused grab was not attempted")
}

// streamContext is the context of a test's stream: cancelled when the
// test ends, before its server closes, so that a stream a failed test
// left open does not hold the server's Close.
func streamContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// TestRPCGrabAnswersUncompressed: the grab procedures answer uncompressed
// even to a client that accepts gzip (connect's clients do, by default),
// as the JSON routes do: a gateway sits next to serve, and gzipping a
// stream's results took nearly half of serve's CPU for the stream. The client's
// gzip here counts the messages it inflates.
func TestRPCGrabAnswersUncompressed(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	for _, p := range rpcProtocols {
		t.Run(p, func(t *testing.T) {
			c := ts.rpc(t, p)
			var inflated atomic.Int64
			gz := connect.WithAcceptCompression("gzip",
				func() connect.Decompressor { return &countingGunzip{n: &inflated} },
				func() connect.Compressor { return gzip.NewWriter(io.Discard) })
			grabs := hongbaov1connect.NewGrabServiceClient(c.http, ts.URL, append(slices.Clone(c.opts), gz)...)
			id := ts.create(t, `{"total":"100.00","count":100,"min":"0.01"}`)
			users := make([]string, 200)
			for i := range users {
				users[i] = fmt.Sprintf("gzip-user-%d", i)
			}
			res, err := grabs.GrabBatch(context.Background(), authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: users}, string(gatewayKey)))
			require.NoError(t, err)
			require.Len(t, res.Msg.Results, 200)
			require.Zero(t, inflated.Load(), "the batch's answer was gzipped")
			if p == "connect" {
				return // streams need HTTP/2
			}
			st := grabs.GrabStream(streamContext(t))
			st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
			req := &hongbaov1.GrabStreamRequest{CampaignId: id}
			for i, u := range users {
				req.Grabs = append(req.Grabs, &hongbaov1.StreamGrab{UserId: u, Ref: uint64(i)})
			}
			require.NoError(t, st.Send(req))
			require.NoError(t, st.CloseRequest())
			var n int
			for {
				msg, err := st.Receive()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				n += len(msg.Results)
			}
			require.Equal(t, 200, n)
			require.Zero(t, inflated.Load(), "the stream's answers were gzipped")
			require.NoError(t, st.CloseResponse())
		})
	}
}

// countingGunzip is gzip's reader, counting the messages it is given
// (connect resets a pooled reader to http.NoBody: not a message).
type countingGunzip struct {
	gzip.Reader
	n *atomic.Int64
}

func (g *countingGunzip) Reset(r io.Reader) error {
	if r != http.NoBody {
		g.n.Add(1)
	}
	return g.Reader.Reset(r)
}
