package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/httpapi"
)

// TestRPCCredentialMatrix: each credential opens over each protocol the
// procedures of its class and no other: a user token Grab only, a gateway
// key GrabBatch and GrabStream only, a payment key the discounts only, an
// admin key the gateway's and the payment system's procedures but not a
// user's Grab. A refused call grabs nothing.
func TestRPCCredentialMatrix(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.GatewayKeys, c.UserRate, c.AuthFailBurst = [][]byte{gatewayKey}, -1, 10_000
	})
	id := ts.create(t, `{"total":"100.00","count":100}`)
	disc := ts.createDiscount(t, `{"budget":"100.00","quota":50,"min":"0.01","max":"5.00","per_user_count":3,"hold":"30s"}`)
	creds := []struct{ name, value string }{
		{"user", token(t, "cred-user")}, {"gateway", string(gatewayKey)}, {"payment", string(paymentKey)},
		{"admin", string(adminKey)}, {"none", ""},
	}
	// allowed[procedure] are the credentials it lets through; a user
	// token elsewhere is forbidden where the class names it (gateway,
	// payment), else unauthenticated.
	allowed := map[string][]string{"Grab": {"user"}, "GrabBatch": {"gateway", "admin"},
		"GrabStream": {"gateway", "admin"}, "Reserve": {"payment", "admin"}}
	userForbidden := map[string]bool{"GrabBatch": true, "GrabStream": true, "Reserve": true}
	for _, p := range rpcProtocols {
		c := ts.rpc(t, p)
		for i, cr := range creds {
			victim := fmt.Sprintf("victim-%s-%d", p, i)
			calls := map[string]func() error{
				"Grab": func() error {
					_, err := c.grabs.Grab(context.Background(), authed(&hongbaov1.GrabRequest{CampaignId: id}, cr.value))
					return err
				},
				"GrabBatch": func() error {
					_, err := c.grabs.GrabBatch(context.Background(),
						authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: []string{victim}}, cr.value))
					return err
				},
				"GrabStream": func() error {
					if p == "connect" {
						return errSkip // no bidirectional stream over HTTP/1.1
					}
					return streamOnce(t, c, cr.value, id, victim)
				},
				"Reserve": func() error {
					_, err := c.discounts.Reserve(context.Background(), authed(&hongbaov1.ReserveRequest{CampaignId: disc, UserId: victim,
						OrderId: "o-" + victim, OrderAmount: &hongbaov1.ReserveRequest_OrderAmountCents{OrderAmountCents: 5000}}, cr.value))
					return err
				},
			}
			for proc, call := range calls {
				err := call()
				if errors.Is(err, errSkip) {
					continue
				}
				what := fmt.Sprintf("%s: %s with %s", p, proc, cr.name)
				switch {
				case contains(allowed[proc], cr.name):
					require.NoError(t, err, what)
				case cr.name == "user" && userForbidden[proc]:
					requireRPCError(t, err, connect.CodePermissionDenied, httpapi.CodeForbidden)
				default:
					require.Error(t, err, what)
					requireRPCError(t, err, connect.CodeUnauthenticated, httpapi.CodeUnauthorized)
				}
			}
			if !contains([]string{"gateway", "admin"}, cr.name) {
				_, err := ts.Engine.Held(context.Background(), id, victim)
				require.ErrorIs(t, err, hongbao.ErrNoGrant, "%s: %s grabbed for another user", p, cr.name)
			}
		}
	}
}

var errSkip = errors.New("not over this protocol")

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// streamOnce opens a grab stream with credential, grabs user in it and
// answers the stream's error, or the grab's per-grab error.
func streamOnce(t *testing.T, c rpcConn, credential, id, user string) error {
	st := c.grabs.GrabStream(streamContext(t))
	if credential != "" {
		st.RequestHeader().Set("Authorization", "Bearer "+credential)
	}
	_ = st.Send(&hongbaov1.GrabStreamRequest{CampaignId: id, Grabs: []*hongbaov1.StreamGrab{{UserId: user, Ref: 1}}})
	_ = st.CloseRequest()
	defer func() { _ = st.CloseResponse() }()
	var n int
	for {
		res, err := st.Receive()
		if errors.Is(err, io.EOF) {
			if n != 1 {
				return fmt.Errorf("%d results for one grab", n)
			}
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range res.Results {
			n++
			if r.Error != "" {
				return fmt.Errorf("grab answered %s", r.Error)
			}
		}
	}
}
