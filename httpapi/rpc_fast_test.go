package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// TestRPCGrabForms: the unary Grab answers alike in each form of the
// Connect protocol, the plain one (proto, uncompressed, no timeout: the
// server's own path) and those connect's handler serves (a gzipped
// request, the JSON codec, a timeout header): granted, the retry already_granted with the same packet, the
// per-user limit with Retry-After, the refusals with their error detail.
func TestRPCGrabForms(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate, c.UserBurst = 0.01, 2 })
	id := ts.create(t, `{"total":"10.00","count":10}`)
	c := ts.rpc(t, "connect")
	for _, form := range []struct {
		name    string
		opts    []connect.ClientOption
		timeout bool
	}{
		{name: "plain"},
		{name: "gzip", opts: []connect.ClientOption{connect.WithSendGzip()}},
		{name: "json", opts: []connect.ClientOption{connect.WithProtoJSON()}},
		{name: "timeout", timeout: true},
	} {
		grabs := hongbaov1connect.NewGrabServiceClient(c.http, ts.URL, form.opts...)
		ctx := context.Background()
		if form.timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Minute)
			defer cancel()
		}
		user := "form-" + form.name
		first, err := grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
		require.NoError(t, err, form.name)
		require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_GRANTED, first.Msg.Outcome, form.name)
		require.True(t, strings.HasPrefix(first.Msg.PacketId, id+"/"), first.Msg.PacketId)
		again, err := grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
		require.NoError(t, err, form.name)
		require.Equal(t, hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED, again.Msg.Outcome, form.name)
		require.Equal(t, first.Msg.PacketId, again.Msg.PacketId, form.name)
		require.Equal(t, first.Msg.AmountCents, again.Msg.AmountCents, form.name)
		_, err = grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, user)))
		ce := requireRPCError(t, err, connect.CodeResourceExhausted, httpapi.CodeRateLimited)
		require.NotEmpty(t, ce.Meta().Get("Retry-After"), form.name)
		_, err = grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: "no-such"}, token(t, user+"-x")))
		requireRPCError(t, err, connect.CodeNotFound, httpapi.CodeNotFound)
		_, err = grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, ""))
		requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)
	}

	// What the plain form refuses before the gates, as connect refuses it:
	// a message that does not decode, and one above the cap.
	post := func(body string) (int, map[string]any) {
		req, err := http.NewRequest("POST", ts.URL+hongbaov1connect.GrabServiceGrabProcedure, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set("Authorization", "Bearer "+token(t, "raw"))
		res, err := openapitest.Client(t).Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, "application/json", res.Header.Get("Content-Type"))
		var m map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
		return res.StatusCode, m
	}
	code, m := post("\xff\xff\xff")
	require.Equal(t, http.StatusBadRequest, code, "%v", m)
	require.Equal(t, "invalid_argument", m["code"], "%v", m)
	big, err := proto.Marshal(&hongbaov1.GrabRequest{CampaignId: strings.Repeat("a", 300<<10)})
	require.NoError(t, err)
	code, m = post(string(big))
	require.Equal(t, http.StatusTooManyRequests, code, "%v", m)
	require.Equal(t, "resource_exhausted", m["code"], "%v", m)
}
