package clienttest

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestRetryAfterLostGrab: the first grab's reply is lost after the
// service granted. The client retries (a grab is idempotent for the user
// and campaign) and answers the same packet; the campaign granted one.
func TestRetryAfterLostGrab(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)

	drop := &dropFirst{suffix: "/grab"}
	dave := newClient(t, svc, userToken(t, "dave"), drop)
	g, err := dave.Grab(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, drop.dropped)
	require.Equal(t, 2, svc.fault.count("/grab"), "the grab was sent, its reply lost, and sent again")
	require.Equal(t, client.AlreadyGranted, g.Outcome, "the retry found the first attempt's grant")
	p, err := dave.Held(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, p.PacketID, g.PacketID)
	require.Equal(t, p.AmountCents, g.AmountCents)
	st, err := admin.Campaign(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, 1, st.GrantedCount, "one packet, not two")
	require.Equal(t, g.AmountCents, st.GrantedCents)
	require.EqualValues(t, 1000, st.GrantedCents+st.RemainingCents)
}

// TestRetryAfterLostReserve: the same for a reserve with its order id,
// then a confirm whose reply is lost.
func TestRetryAfterLostReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	d, err := admin.CreateDiscount(ctx, client.DiscountSpec{BudgetCents: 1000, Quota: 10, PerUserUnlimited: true})
	require.NoError(t, err)

	pay := newClient(t, svc, paymentKey, &dropFirst{suffix: "/reserve"})
	r, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "erin", OrderID: "o-1", OrderAmountCents: 100000})
	require.NoError(t, err)
	require.Equal(t, client.Already, r.Outcome)
	require.Equal(t, 2, svc.fault.count("/reserve"))

	pay = newClient(t, svc, paymentKey, &dropFirst{suffix: "/confirm"})
	o, err := pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "erin", OrderID: "o-1"})
	require.NoError(t, err)
	require.Equal(t, client.Confirmed, o.Outcome)
	require.Equal(t, r.AmountCents, o.AmountCents)
	require.Equal(t, 2, svc.fault.count("/confirm"))

	st, err := admin.Discount(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, 1, st.ConfirmedCount, "one discount, not two")
	require.Equal(t, r.AmountCents, st.ConfirmedCents)
	require.Zero(t, st.ReservedCount)
	require.EqualValues(t, 1000, st.ConfirmedCents+st.ReservedCents+st.RemainingCents)
}

// TestRetryAfterLostCreate: a create whose reply is lost is retried under
// the key the client drew, and makes one campaign.
func TestRetryAfterLostCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, &dropFirst{suffix: "/v1/campaigns"})
	funding := testenv.UniqueID(t) // a run of its own: -count=N reuses the shared Redis
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 500, Count: 5, FundingAccount: funding})
	require.NoError(t, err)
	require.Equal(t, 2, svc.fault.count("POST /v1/campaigns"))
	list, err := admin.Campaigns(ctx)
	require.NoError(t, err)
	n := 0
	for _, l := range list.Campaigns {
		if l.FundingAccount == funding {
			n++
			require.Equal(t, c.ID, l.ID)
		}
	}
	require.Equal(t, 1, n, "one campaign, not two")
}

// TestNoBlindRetry: a redrive whose reply is lost is not sent again; the
// caller hears that the outcome is unknown.
func TestNoBlindRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 100, Count: 1})
	require.NoError(t, err)
	_, err = newClient(t, svc, adminKey, &dropFirst{suffix: "/redrive"}).Redrive(ctx, c.ID)
	require.ErrorIs(t, err, client.ErrOutcomeUnknown)
	require.Equal(t, 1, svc.fault.count("/redrive"))

	// Nor after a 503 outcome_unknown; a grab is, until it is answered.
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n > 1 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"outcome_unknown","message":"the answer was lost; retrying is safe"}}`))
		return true
	})
	_, err = admin.Redrive(ctx, c.ID+"x")
	require.ErrorIs(t, err, client.ErrOutcomeUnknown)
	require.Equal(t, 1, svc.fault.count(c.ID+"x/redrive"))
	g, err := admin.As(userToken(t, "fay")).Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Granted, g.Outcome)
	require.Equal(t, 2, svc.fault.count("/grab"))
}

// busyOnce answers the first request of each route 503 busy with
// Retry-After: 1, as the service does when its queue is full.
func busyOnce(w http.ResponseWriter, r *http.Request, n int) bool {
	if n > 1 {
		return false
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"busy; nothing was done, retry shortly"}}`))
	return true
}

// TestRetryAfterHonoured: a busy answer is retried (nothing was done, so
// even a redrive is) after the second it asks for, not before; a caller
// whose deadline comes first hears busy at once.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 100, Count: 1})
	require.NoError(t, err)
	svc.fault.set(busyOnce)

	start := time.Now()
	rd, err := admin.Redrive(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, c.ID, rd.Campaign)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After: 1 waited for")
	require.Equal(t, 2, svc.fault.count("/redrive"))

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = admin.As(userToken(t, "gus")).Grab(short, c.ID)
	require.ErrorIs(t, err, client.ErrBusy)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, time.Second, e.RetryAfter)
	require.Less(t, time.Since(start), 300*time.Millisecond, "no wait the deadline cannot see the end of")
	require.Equal(t, 1, svc.fault.count("/grab"))
}

// TestRetryBounded: a service that stays busy is asked MaxAttempts times,
// then its answer is returned.
func TestRetryBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"outcome_unknown","message":"lost"}}`))
		return true
	})
	c, err := client.New(svc.URL, client.Options{Token: userToken(t, "hal"), HTTPClient: openapitest.Client(t),
		Retry: client.Retry{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	require.NoError(t, err)
	_, err = c.Grab(context.Background(), "any")
	require.ErrorIs(t, err, client.ErrOutcomeUnknown)
	require.Equal(t, 3, svc.fault.count("/grab"))
}

// TestRetryNotSent: a connection that cannot be made did nothing: every
// call is retried, and the last error says it was never sent, not that
// its outcome is unknown.
func TestRetryNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var dials int
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	c, err := client.New("http://"+addr, client.Options{Token: adminKey, HTTPClient: &http.Client{Transport: openapitest.Transport(t, tr)},
		Retry: client.Retry{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	require.NoError(t, err)
	_, err = c.Redrive(context.Background(), "any")
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrOutcomeUnknown)
	require.Equal(t, 3, dials)
}

// TestTraceparent: with Options.Propagate set to OpenTelemetry's W3C
// propagator (as the package documentation shows), a call made in a span
// sends its trace context, so the service's spans join the caller's
// trace; one without sends none; a client without Propagate sends none.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	var got []string
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		got = append(got, r.Header.Get("traceparent"))
		return false
	})
	c, err := client.New(svc.URL, client.Options{Token: adminKey, HTTPClient: openapitest.Client(t),
		Propagate: func(ctx context.Context, h http.Header) {
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
		}})
	require.NoError(t, err)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	require.NoError(t, c.Healthy(ctx))
	require.NoError(t, c.Healthy(context.Background()))
	require.NoError(t, newClient(t, svc, adminKey, nil).Healthy(ctx))
	require.Equal(t, []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", ""}, got)
}
