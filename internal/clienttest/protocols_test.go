package clienttest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
)

var protocols = []client.Protocol{client.JSON, client.Connect, client.GRPC}

// answer is a call's result as a caller sees it, with what differs
// between campaigns (their ids) taken out.
type answer struct {
	Outcome string
	Packet  string // the packet's seq
	Cents   int64
	Expires bool // a reservation's hold ends in the future
	Status  int
	Code    string
	Is      string        // the sentinel the error matches
	Wait    time.Duration // the wait the error asks (RetryAfter)
	Unknown bool          // it matches ErrOutcomeUnknown
}

var sentinelsByName = map[string]error{
	"ErrNotFound": client.ErrNotFound, "ErrUnauthorized": client.ErrUnauthorized, "ErrForbidden": client.ErrForbidden,
	"ErrRateLimited": client.ErrRateLimited, "ErrOrderMismatch": client.ErrOrderMismatch, "ErrConfirmed": client.ErrConfirmed,
	"ErrCancelled": client.ErrCancelled, "ErrNoReservation": client.ErrNoReservation, "ErrInvalidID": client.ErrInvalidID,
}

func errAnswer(t *testing.T, err error) answer {
	t.Helper()
	var e *client.Error
	require.ErrorAs(t, err, &e)
	a := answer{Status: e.Status, Code: e.Code, Wait: e.RetryAfter, Unknown: errors.Is(err, client.ErrOutcomeUnknown)}
	require.NotEmpty(t, e.Message)
	for name, s := range sentinelsByName {
		if errors.Is(err, s) {
			require.Empty(t, a.Is, "%v matches %s and %s", err, a.Is, name)
			a.Is = name
		}
	}
	return a
}

func seqOf(t *testing.T, campaign, packet string) string {
	t.Helper()
	seq, ok := strings.CutPrefix(packet, campaign+"/")
	require.True(t, ok, "packet %q of campaign %q", packet, campaign)
	return seq
}

// TestProtocolsAnswerAlike: the same table of calls over JSON, Connect
// and gRPC gives the same answers and the same errors: grabs (granted,
// a repeat already_granted with the same packet, sold_out, no campaign,
// a bad credential, the per-user limit with its wait), a gateway's batch,
// and a discount's reserve, confirm and cancel with their refusals.
func TestProtocolsAnswerAlike(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	limited := newServiceWith(t, func(c *httpapi.Config) { c.UserRate, c.UserBurst = 0.001, 1 })

	want := []answer{
		{Outcome: client.Granted, Packet: "3", Cents: 100}, // the pool is popped from its end
		{Outcome: client.AlreadyGranted, Packet: "3", Cents: 100},
		{Outcome: client.Granted, Packet: "2", Cents: 100},
		{Outcome: client.SoldOut},
		{Status: 404, Code: "not_found", Is: "ErrNotFound"},
		{Status: 401, Code: "unauthorized", Is: "ErrUnauthorized"},
		{Status: 400, Code: "invalid_id", Is: "ErrInvalidID"},
		{Outcome: client.Granted, Packet: "3", Cents: 100},
		{Status: 429, Code: "rate_limited", Is: "ErrRateLimited", Wait: 1000 * time.Second}, // 1/UserRate, in whole seconds
		{Outcome: client.AlreadyGranted, Packet: "3", Cents: 100},                           // the batch
		{Outcome: client.AlreadyGranted, Packet: "1", Cents: 100},
		{Outcome: client.SoldOut},
		{Status: 404, Code: "not_found", Is: "ErrNotFound"},
		{Outcome: client.Reserved, Cents: 100, Expires: true},
		{Outcome: client.Already, Cents: 100, Expires: true},
		{Status: 409, Code: "order_mismatch", Is: "ErrOrderMismatch"},
		{Outcome: client.Confirmed, Cents: 100},
		{Outcome: client.Confirmed, Cents: 100},
		{Status: 409, Code: "confirmed", Is: "ErrConfirmed"},
		{Outcome: client.Reserved, Cents: 100, Expires: true},
		{Outcome: client.Cancelled},
		{Outcome: client.Cancelled},
		{Status: 409, Code: "cancelled", Is: "ErrCancelled"},
		{Status: 404, Code: "no_reservation", Is: "ErrNoReservation"},
		{Status: 403, Code: "forbidden", Is: "ErrForbidden"},
		{Status: 401, Code: "unauthorized", Is: "ErrUnauthorized"},
	}
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			admin := newClient(t, svc, adminKey, nil)
			seed := uint64(11)
			c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 300, Count: 3, Split: "fixed", Seed: &seed})
			require.NoError(t, err)
			var got []answer
			grab := func(g *client.Grab, err error) {
				if err != nil {
					got = append(got, errAnswer(t, err))
					return
				}
				a := answer{Outcome: g.Outcome, Cents: g.AmountCents}
				require.Equal(t, c.ID, g.Campaign)
				if g.Holds() {
					a.Packet = seqOf(t, c.ID, g.PacketID)
				}
				got = append(got, a)
			}
			as := func(token string) *client.Client { return newClientOver(t, svc, token, nil, p) }
			ann := as(userToken(t, "ann"))
			grab(ann.Grab(ctx, c.ID))
			grab(ann.Grab(ctx, c.ID))
			grab(as(userToken(t, "bob")).Grab(ctx, c.ID))
			// The last packet goes to the gateway's batch below; sold out
			// for cal while the batch's third user waits.
			gw, err := as(gatewayKey).Gateway(client.GatewayOptions{})
			require.NoError(t, err)
			dee, err := gw.Grab(ctx, c.ID, "dee")
			require.NoError(t, err)
			require.Equal(t, client.Granted, dee.Outcome)
			grab(as(userToken(t, "cal")).Grab(ctx, c.ID))
			grab(ann.Grab(ctx, "no-such-campaign"))
			grab(as("not-a-token").Grab(ctx, c.ID))
			grab(ann.Grab(ctx, "bad*id"))

			// The per-user limit, on a service that has one: the second
			// grab within 1000 s is refused, with the wait.
			lc, err := newClient(t, limited, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 300, Count: 3, Split: "fixed", Seed: &seed})
			require.NoError(t, err)
			lim := newClientOver(t, limited, userToken(t, "lim-"+p.String()), nil, p)
			g, err := lim.Grab(ctx, lc.ID)
			if err == nil {
				g.PacketID = strings.Replace(g.PacketID, lc.ID, c.ID, 1)
				g.Campaign = c.ID
			}
			grab(g, err)
			grab(lim.Grab(ctx, lc.ID))

			// A gateway's batch: ann and dee hold packets, eve finds none.
			for _, u := range []string{"ann", "dee", "eve"} {
				grab(gw.Grab(ctx, c.ID, u))
			}
			_, err = gw.Grab(ctx, "no-such-campaign", "ann")
			got = append(got, errAnswer(t, err))

			// A discount's round, under the payment key.
			d, err := admin.CreateDiscount(ctx, client.DiscountSpec{BudgetCents: 1000, Quota: 10, MinCents: 100, MaxCents: 100, PerUserCount: 5})
			require.NoError(t, err)
			pay := as(paymentKey)
			reserve := func(r *client.Reservation, err error) {
				if err != nil {
					got = append(got, errAnswer(t, err))
					return
				}
				require.NotEmpty(t, r.OrderID)
				got = append(got, answer{Outcome: r.Outcome, Cents: r.AmountCents, Expires: r.ExpiresAt.After(time.Now())})
			}
			order := func(o *client.OrderOutcome, err error) {
				if err != nil {
					got = append(got, errAnswer(t, err))
					return
				}
				got = append(got, answer{Outcome: o.Outcome, Cents: o.AmountCents})
			}
			reserve(pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 5000}))
			reserve(pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 5000}))
			reserve(pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 4000}))
			order(pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o1"}))
			order(pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o1"}))
			order(pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o1"}))
			reserve(pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o2", OrderAmountCents: 5000}))
			order(pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o2"}))
			order(pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o2"}))
			reserve(pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o2", OrderAmountCents: 5000}))
			order(pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o9"}))
			reserve(as(userToken(t, "u1")).Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o3", OrderAmountCents: 5000}))
			reserve(as("not-a-key").Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o3", OrderAmountCents: 5000}))

			for i := range max(len(want), len(got)) {
				var w, g answer
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				require.Equal(t, w, g, "call %d over %v", i, p)
			}
			st, err := admin.Discount(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, 1, st.ConfirmedCount)
			require.EqualValues(t, 1000, st.ConfirmedCents+st.ReservedCents+st.RemainingCents)
		})
	}
}

// codeRow is a row of docs/service.md's table of error codes, which
// httpapi's tests hold to the service's errorCodes.
var codeRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| (\\d{3}) \\| `[a-z_]+` \\((\\d+)\\) \\|$")

// fakeErrors is a GrabService whose Grab answers, for campaign id "<rpc
// code>.<code>", the error the service answers for that code.
type fakeErrors struct {
	hongbaov1connect.UnimplementedGrabServiceHandler
}

func (fakeErrors) Grab(_ context.Context, req *connect.Request[hongbaov1.GrabRequest]) (*connect.Response[hongbaov1.GrabResponse], error) {
	num, code, _ := strings.Cut(req.Msg.GetCampaignId(), ".")
	n, _ := strconv.Atoi(num)
	e := connect.NewError(connect.Code(n), errors.New("refused"))
	d, err := connect.NewErrorDetail(&hongbaov1.Error{Code: code})
	if err != nil {
		return nil, err
	}
	e.AddDetail(d)
	return nil, e
}

// TestRPCErrorStatuses: for every error code of the service, an error
// of a procedure carrying it is an *Error with the HTTP status the JSON
// route answers for it, as docs/service.md's table gives them.
func TestRPCErrorStatuses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "service.md"))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(hongbaov1connect.NewGrabServiceHandler(fakeErrors{}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New(hs.URL, client.Options{Protocol: client.Connect, Retry: client.NoRetry, HTTPClient: &http.Client{Transport: openapitest.Transport(t, tr)}})
	require.NoError(t, err)
	rows := 0
	for line := range strings.SplitSeq(string(doc), "\n") {
		m := codeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		_, err := c.Grab(context.Background(), m[3]+"."+m[1])
		var e *client.Error
		require.ErrorAs(t, err, &e, m[1])
		require.Equal(t, m[1], e.Code)
		require.Equal(t, m[2], strconv.Itoa(e.Status), "the status of %s", m[1])
	}
	require.Greater(t, rows, 20, "docs/service.md's table of codes was found")
}
