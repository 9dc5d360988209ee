package clienttest

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestCampaignCalls: every red packet call against the real service.
func TestCampaignCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	require.NoError(t, admin.Healthy(ctx))
	require.NoError(t, admin.Ready(ctx))

	seed := uint64(7)
	spec := client.CampaignSpec{TotalCents: 300, Count: 3, Split: "fixed", Seed: &seed, IdempotencyKey: testenv.UniqueID(t)}
	c, err := admin.CreateCampaign(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, "open", c.State)
	require.EqualValues(t, 300, c.TotalCents)
	require.Equal(t, 3, c.Count)
	require.EqualValues(t, 7, c.Seed)
	require.Equal(t, 1, c.Shards)
	require.Equal(t, "platform", c.FundingAccount)
	again, err := admin.CreateCampaign(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, c.ID, again.ID, "the same key answers the same campaign")
	spec.TotalCents = 400
	_, err = admin.CreateCampaign(ctx, spec)
	require.ErrorIs(t, err, client.ErrIdempotencyMismatch)

	alice := admin.As(userToken(t, "alice"))
	g, err := alice.Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Granted, g.Outcome)
	require.EqualValues(t, 100, g.AmountCents)
	require.True(t, g.Holds())
	g2, err := alice.Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.AlreadyGranted, g2.Outcome)
	require.Equal(t, g.PacketID, g2.PacketID)
	p, err := alice.Held(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Packet{Campaign: c.ID, PacketID: g.PacketID, AmountCents: 100}, *p)

	st, err := admin.Campaign(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, *c, st.Campaign)
	require.Equal(t, 1, st.GrantedCount)
	require.EqualValues(t, 100, st.GrantedCents)
	require.EqualValues(t, 200, st.RemainingCents)
	require.False(t, st.Now.IsZero())
	list, err := admin.Campaigns(ctx)
	require.NoError(t, err)
	require.Contains(t, ids(list), c.ID)

	closed, err := admin.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, "closed", closed.State)
	require.Equal(t, "operator", closed.CloseReason)
	again2, err := admin.CloseCampaign(ctx, c.ID)
	require.NoError(t, err, "a close is idempotent, so the client may retry it")
	require.Equal(t, "closed", again2.State)
	require.Equal(t, "operator", again2.CloseReason)
	g3, err := admin.As(userToken(t, "bob")).Grab(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Closed, g3.Outcome)
	require.False(t, g3.Holds())
	rd, err := admin.Redrive(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, client.Redrive{Campaign: c.ID, RedrivenEntries: 0}, *rd)
}

func ids(l *client.CampaignList) []string {
	var out []string
	for _, c := range l.Campaigns {
		out = append(out, c.ID)
	}
	return out
}

// TestDiscountCalls: every discount call, with the payment key, and the
// order errors as sentinels.
func TestDiscountCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	pay := admin.As(paymentKey)

	d, err := admin.CreateDiscount(ctx, client.DiscountSpec{BudgetCents: 1000, Quota: 10, MinCents: 100, MaxCents: 100,
		PerUserCount: 5, Hold: client.Duration(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, "open", d.State)
	require.Equal(t, client.Duration(time.Minute), d.Hold)
	require.Equal(t, 5, d.PerUserCount)

	r, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 5000})
	require.NoError(t, err)
	require.Equal(t, client.Reserved, r.Outcome)
	require.EqualValues(t, 100, r.AmountCents)
	require.True(t, r.ExpiresAt.After(time.Now()))
	r2, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 5000})
	require.NoError(t, err)
	require.Equal(t, client.Already, r2.Outcome)
	require.True(t, r2.Holds())
	_, err = pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o1", OrderAmountCents: 4000})
	require.ErrorIs(t, err, client.ErrOrderMismatch)

	for range 2 {
		o, err := pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o1"})
		require.NoError(t, err)
		require.Equal(t, client.OrderOutcome{Outcome: client.Confirmed, OrderID: "o1", AmountCents: 100}, *o)
	}
	_, err = pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o1"})
	require.ErrorIs(t, err, client.ErrConfirmed)

	_, err = pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o2", OrderAmountCents: 5000})
	require.NoError(t, err)
	o, err := pay.Cancel(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o2"})
	require.NoError(t, err)
	require.Equal(t, client.Cancelled, o.Outcome)
	_, err = pay.Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o2", OrderAmountCents: 5000})
	require.ErrorIs(t, err, client.ErrCancelled)
	_, err = pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o2"})
	require.ErrorIs(t, err, client.ErrCancelled)
	_, err = pay.Confirm(ctx, d.ID, client.OrderRef{UserID: "u1", OrderID: "o9"})
	require.ErrorIs(t, err, client.ErrNoReservation)
	_, err = admin.As(userToken(t, "u1")).Reserve(ctx, d.ID, client.Order{UserID: "u1", OrderID: "o3", OrderAmountCents: 5000})
	require.ErrorIs(t, err, client.ErrForbidden)

	st, err := admin.Discount(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, 1, st.ConfirmedCount)
	require.EqualValues(t, 100, st.ConfirmedCents)
	require.Equal(t, 0, st.ReservedCount)
	require.EqualValues(t, 900, st.RemainingCents)
	closed, err := admin.CloseDiscount(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, "closed", closed.State)
	r3, err := pay.Reserve(ctx, d.ID, client.Order{UserID: "u2", OrderID: "o1", OrderAmountCents: 5000})
	require.NoError(t, err)
	require.Equal(t, client.Closed, r3.Outcome)
	require.False(t, r3.Holds())
}

// TestErrorMapping: the service's error answers are *Error values that
// match the sentinel of their code, and no other.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	admin := newClient(t, svc, adminKey, nil)
	c, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 100, Count: 1})
	require.NoError(t, err)
	user := admin.As(userToken(t, "carol"))

	cases := []struct {
		name   string
		call   func() error
		status int
		code   string
		is     error
	}{
		{"bad token", func() error { _, err := admin.As("not-a-token").Grab(ctx, c.ID); return err }, 401, "unauthorized", client.ErrUnauthorized},
		{"no credential", func() error { _, err := admin.As("").Campaign(ctx, c.ID); return err }, 401, "unauthorized", client.ErrUnauthorized},
		{"user on an admin route", func() error { _, err := user.Campaign(ctx, c.ID); return err }, 401, "unauthorized", client.ErrUnauthorized},
		{"no campaign", func() error { _, err := user.Grab(ctx, "no-such-campaign"); return err }, 404, "not_found", client.ErrNotFound},
		{"no grant", func() error { _, err := user.Held(ctx, c.ID); return err }, 404, "no_grant", client.ErrNoGrant},
		{"bad id", func() error { _, err := user.Grab(ctx, "bad*id"); return err }, 400, "invalid_id", client.ErrInvalidID},
		{"bad spec", func() error {
			_, err := admin.CreateCampaign(ctx, client.CampaignSpec{TotalCents: 100, Count: 0})
			return err
		}, 400, "invalid_request", client.ErrInvalidRequest},
		{"bad order id", func() error {
			_, err := admin.Confirm(ctx, c.ID, client.OrderRef{UserID: "u", OrderID: "o*"})
			return err
		}, 400, "invalid_id", client.ErrInvalidID},
	}
	for _, tc := range cases {
		err := tc.call()
		var e *client.Error
		require.True(t, errors.As(err, &e), "%s: %v", tc.name, err)
		require.Equal(t, tc.status, e.Status, tc.name)
		require.Equal(t, tc.code, e.Code, tc.name)
		require.NotEmpty(t, e.Message, tc.name)
		require.ErrorIs(t, err, tc.is, tc.name)
		require.NotErrorIs(t, err, client.ErrOutcomeUnknown, tc.name)
		require.NotErrorIs(t, err, client.ErrBusy, tc.name)
	}
	require.Equal(t, 3, svc.fault.count("/grab"), "a final error is not retried: three grabs, one request each")
}

// A non-JSON answer (a gateway's) keeps its status and matches no code.
func TestNonJSONError(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set(openapitest.Foreign, "a gateway's reply, not the service's")
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return true
	})
	_, err := newClient(t, svc, adminKey, nil).Redrive(context.Background(), "x")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusBadGateway, e.Status)
	require.Empty(t, e.Code)
	require.Equal(t, 1, svc.fault.count("/redrive"), "a redrive is never sent twice after an unknown outcome")
}
