package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// rpcRequest is a request for msg with a bearer credential.
func rpcRequest[T any](msg *T, credential string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", "Bearer "+credential)
	return req
}

// TestServeRPC: serve answers the Connect and gRPC procedures on its one
// listener, gRPC over h2c beside HTTP/1.1: a user's Grab and its retry,
// a gateway's GrabBatch and stream (the JSON batch agreeing), health
// SERVING and reflection listing the services.
func TestServeRPC(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gwFile := writeSecret(t, fx.dir, "gateway.key")
	p := startServe(t, fx.args("--gateway-key-file", gwFile, "--user-rate", "-1")...)
	api := fx.api(t, p.URL)
	gw, err := os.ReadFile(gwFile)
	require.NoError(t, err)
	gateway := strings.TrimSpace(string(gw))
	id := api.create(t, p.URL, `{"total":"5.00","count":4,"min":"0.01"}`)
	ctx := context.Background()

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 30 * time.Second}
	for _, proto := range []string{"grpc", "connect"} {
		var opts []connect.ClientOption
		if proto == "grpc" {
			opts = append(opts, connect.WithGRPC())
		}
		grabs := hongbaov1connect.NewGrabServiceClient(hc, p.URL, opts...)
		user := "ann-" + proto
		first, err := grabs.Grab(ctx, rpcRequest(&hongbaov1.GrabRequest{CampaignId: id}, api.userToken(t, user)))
		require.NoError(t, err, proto)
		require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, first.Msg.Outcome, proto)
		again, err := grabs.Grab(ctx, rpcRequest(&hongbaov1.GrabRequest{CampaignId: id}, api.userToken(t, user)))
		require.NoError(t, err, proto)
		require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, again.Msg.Outcome, proto)
		require.Equal(t, first.Msg.PacketId, again.Msg.PacketId, proto)
		_, err = grabs.Grab(ctx, rpcRequest(&hongbaov1.GrabRequest{CampaignId: "nope"}, api.userToken(t, user)))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%s: %v", proto, err)
		_, err = grabs.GrabBatch(ctx, rpcRequest(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{"x"}}, api.userToken(t, user)))
		require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%s: %v", proto, err)
	}

	grabs := hongbaov1connect.NewGrabServiceClient(hc, p.URL, connect.WithGRPC())
	batch, err := grabs.GrabBatch(ctx, rpcRequest(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{"ann-grpc", "bob", "cy"}}, gateway))
	require.NoError(t, err)
	require.Len(t, batch.Msg.Results, 3)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, batch.Msg.Results[0].Outcome)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, batch.Msg.Results[1].Outcome)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, batch.Msg.Results[2].Outcome, "4 packets: the two anns, bob, cy")

	st := grabs.GrabStream(ctx)
	st.RequestHeader().Set("Authorization", "Bearer "+gateway)
	req := &hongbaov1.GrabStreamRequest{CampaignId: id}
	users := []string{"bob", "dee", "eve", "bob"}
	for i, u := range users {
		req.Grabs = append(req.Grabs, &hongbaov1.StreamGrab{UserId: u, Ref: uint64(i + 10)})
	}
	require.NoError(t, st.Send(req))
	require.NoError(t, st.CloseRequest())
	got := map[uint64]*hongbaov1.GrabResult{}
	for {
		res, err := st.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, r := range res.Results {
			got[r.Ref] = r
		}
	}
	require.NoError(t, st.CloseResponse())
	require.Len(t, got, len(users))
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, got[10].Outcome)
	require.Equal(t, batch.Msg.Results[1].PacketId, got[10].PacketId, "bob's packet")
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_SOLD_OUT, got[11].Outcome)
	// The JSON batch of the same users answers the same packets.
	code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grabs", gateway, `{"users":["bob","dee","eve","bob"]}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)
	for i, r := range m["results"].([]any) {
		js, s := r.(map[string]any), got[uint64(i+10)]
		require.Equal(t, users[i], s.UserId)
		require.Equal(t, users[i], js["user_id"])
		want := strings.ToLower(strings.TrimPrefix(s.Outcome.String(), "GRAB_OUTCOME_"))
		if want == "granted" {
			want = "already_granted"
		}
		require.Equal(t, want, js["outcome"], "user %s", users[i])
		if s.PacketId != "" {
			require.Equal(t, s.PacketId, js["packet_id"])
			require.EqualValues(t, s.AmountCents, js["amount_cents"])
		}
	}

	health := grpchealth.NewClient(hc, p.URL, connect.WithGRPC())
	res, err := health.Check(ctx, &grpchealth.CheckRequest{})
	require.NoError(t, err)
	require.Equal(t, grpchealth.StatusServing, res.Status)
	rs := grpcreflect.NewClient(hc, p.URL, connect.WithGRPC()).NewStream(ctx)
	names, err := rs.ListServices()
	require.NoError(t, err)
	var listed []string
	for _, n := range names {
		listed = append(listed, string(n))
	}
	require.Subset(t, listed, httpapi.RPCServices())
	_, err = rs.Close()
	require.NoError(t, err)
}

// TestServeRPCOverTLS: with TLS, gRPC goes over HTTP/2 negotiated by ALPN,
// as the JSON routes do.
func TestServeRPCOverTLS(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	cert, key, pool := selfSigned(t, fx.dir)
	p := startServe(t, fx.args("--tls-cert-file", cert, "--tls-key-file", key)...)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: openapitest.Transport(t, tr), Timeout: 30 * time.Second}
	res, err := grpchealth.NewClient(hc, p.URL, connect.WithGRPC()).Check(context.Background(), &grpchealth.CheckRequest{})
	require.NoError(t, err)
	require.Equal(t, grpchealth.StatusServing, res.Status)
	_, err = hongbaov1connect.NewGrabServiceClient(hc, p.URL, connect.WithGRPC()).Grab(context.Background(),
		rpcRequest(&hongbaov1.GrabRequest{CampaignId: "nope"}, fx.api(t, p.URL).userToken(t, "ann")))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), fmt.Sprint(err))
}

// TestServeRPCStreamOutlivesTimeouts: a gateway's stream lives past
// serve's per-request read timeout (10s), which would otherwise end it
// while the gateway keeps it for a whole campaign. The wait is the point
// of the test: no condition to poll would stand for the timeout passing.
func TestServeRPCStreamOutlivesTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("waits past serve's read timeout")
	}
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	gwFile := writeSecret(t, fx.dir, "gateway.key")
	p := startServe(t, fx.args("--gateway-key-file", gwFile, "--user-rate", "-1")...)
	gw, err := os.ReadFile(gwFile)
	require.NoError(t, err)
	id := fx.api(t, p.URL).create(t, p.URL, `{"total":"5.00","count":4}`)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: openapitest.Transport(t, tr)}
	st := hongbaov1connect.NewGrabServiceClient(hc, p.URL, connect.WithGRPC()).GrabStream(context.Background())
	st.RequestHeader().Set("Authorization", "Bearer "+strings.TrimSpace(string(gw)))
	grab := func(user string, ref uint64) *hongbaov1.GrabResult {
		t.Helper()
		req := &hongbaov1.GrabStreamRequest{Grabs: []*hongbaov1.StreamGrab{{UserId: user, Ref: ref}}}
		if ref == 1 {
			req.CampaignId = id
		}
		require.NoError(t, st.Send(req))
		res, err := st.Receive()
		require.NoError(t, err)
		require.Len(t, res.Results, 1)
		require.Equal(t, ref, res.Results[0].Ref)
		return res.Results[0]
	}
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, grab("ann", 1).Outcome)
	time.Sleep(11 * time.Second)
	require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, grab("bob", 2).Outcome)
	require.NoError(t, st.CloseRequest())
	_, err = st.Receive()
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, st.CloseResponse())
}
