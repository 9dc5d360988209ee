package webhooktest_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/webhook"
	"github.com/hongbao/hongbao/webhook/webhooktest"
)

var secret = []byte(strings.Repeat("w", 32))

func newSink(t *testing.T, url, name string) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{URL: url, Secret: secret, Name: name, MaxAttempts: 2,
		BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	return s
}

// TestWallet: a sink settles into the wallet; replays are no-ops,
// disagreeing grants are conflicts, and the totals it answers are what it
// holds, tampering included.
func TestWallet(t *testing.T) {
	t.Parallel()
	w := webhooktest.New("wallet:test", secret)
	srv := httptest.NewServer(w)
	defer srv.Close()
	s := newSink(t, srv.URL, "wallet:test")
	ctx := ledger.WithOwner(t.Context(), "wallet:test")

	require.NoError(t, s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 1000}))
	require.NoError(t, s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 1000}), "a replay")
	require.ErrorIs(t, s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 999}), ledger.ErrConflict)

	grants := []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}}
	res, err := s.ApplyGrants(ctx, "c1", grants)
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 2, InsertedCents: 300}, res)
	res, err = s.ApplyGrants(ctx, "c1", append(grants,
		ledger.Grant{Seq: 1, User: "z", Cents: 100}, // packet 1 is a's
		ledger.Grant{Seq: 3, User: "b", Cents: 50},  // b holds packet 2
	))
	require.NoError(t, err)
	require.Len(t, res.Conflicts, 2)
	require.Equal(t, ledger.PacketTaken, res.Conflicts[0].Kind)
	require.Equal(t, ledger.Grant{Campaign: "c1", Seq: 1, User: "a", Cents: 100}, res.Conflicts[0].Existing)
	require.Equal(t, ledger.UserHasOther, res.Conflicts[1].Kind)
	require.Len(t, w.Grants("c1"), 2)

	require.NoError(t, s.Refund(ctx, "c1", 700))
	require.ErrorIs(t, s.Refund(ctx, "c1", 600), ledger.ErrConflict)
	_, err = s.ApplyGrants(ctx, "c1", []ledger.Grant{{Seq: 4, User: "d", Cents: 1}})
	require.ErrorIs(t, err, webhook.ErrRejected, "no new grant after the refund")

	tot, err := s.Totals(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "acme", GrantCount: 2, GrantCents: 300, Refunded: 700, RefundDone: true}, tot)

	require.True(t, w.Drop("c1", 2))
	require.False(t, w.Drop("c1", 2))
	w.SetRefund("c1", 650)
	tot, err = s.Totals(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "acme", GrantCount: 1, GrantCents: 100, Refunded: 650, RefundDone: true, Escrow: 250}, tot)

	tot, err = s.Totals(ctx, "never-heard-of")
	require.NoError(t, err)
	require.Zero(t, tot)
}

// TestWalletRefusesForeign: a sink that sends another owner's events
// (configured with another name than the wallet's) is refused by the
// wallet, as the package doc of webhook asks of every host.
func TestWalletRefusesForeign(t *testing.T) {
	t.Parallel()
	w := webhooktest.New("wallet:test", secret)
	srv := httptest.NewServer(w)
	defer srv.Close()
	s := newSink(t, srv.URL, "wallet:other")
	ctx := ledger.WithOwner(t.Context(), "wallet:other")

	err := s.Fund(ctx, ledger.Campaign{ID: "c1", Funding: "acme", Total: 1000})
	require.ErrorIs(t, err, webhook.ErrRejected)
	_, err = s.Totals(ctx, "c1")
	require.ErrorIs(t, err, webhook.ErrRejected)
	require.Equal(t, 2, w.Foreign())
	require.Zero(t, w.Totals("c1").FundedCents)

	// A campaign that recorded no owner is taken.
	require.NoError(t, s.Fund(t.Context(), ledger.Campaign{ID: "c1", Funding: "acme", Total: 1000}))
	require.EqualValues(t, 1000, w.Totals("c1").FundedCents)

	// A sink with another secret is not heard.
	forger, err := webhook.New(webhook.Config{URL: srv.URL, Secret: []byte(strings.Repeat("f", 32))})
	require.NoError(t, err)
	require.ErrorIs(t, forger.Refund(t.Context(), "c1", 1000), webhook.ErrRejected)
	require.False(t, w.Totals("c1").Refunded)
}
