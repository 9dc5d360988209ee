package ledgertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// V7Ledger is the SQL (both backends) of a ledger at version 7 (before per-slot counters and the
// roll-up): a refunded campaign, a live one and a live discount campaign,
// with the counters and user balances that version kept.
const V7Ledger = `
	INSERT INTO ledger_campaigns (id, funding, total, grant_count, grant_cents, refunded) VALUES
		('done', 'ops', 100, 1, 30, 70), ('live', 'ops', 200, 2, 150, NULL), ('discount:e', 'ops', 50, 1, 20, NULL);
	INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents) VALUES
		('done', 'fund', 'funding:ops', 'escrow:done', 100), ('done', 'refund', 'escrow:done', 'funding:ops', 70),
		('live', 'fund', 'funding:ops', 'escrow:live', 200), ('discount:e', 'fund', 'funding:ops', 'escrow:discount:e', 50);
	INSERT INTO ledger_grants (campaign, seq, user_id, cents)
		SELECT num, 1, 'a', 30 FROM ledger_campaigns WHERE id = 'done'
		UNION ALL SELECT num, 1, 'a', 50 FROM ledger_campaigns WHERE id = 'live'
		UNION ALL SELECT num, 2, 'b', 100 FROM ledger_campaigns WHERE id = 'live';
	INSERT INTO ledger_discounts (campaign, user_id, order_id, seq, cents)
		SELECT num, 'b', 'o1', 1, 20 FROM ledger_campaigns WHERE id = 'discount:e';
	INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:done', 0), ('escrow:live', 50), ('escrow:discount:e', 30),
		('funding:ops', -280), ('user:a', 80), ('user:b', 120)`

// RequireUpgradedTo8 checks a ledger that migration 0008 upgraded from
// V7Ledger: the counters and balances carried over exactly, and the refund
// of a campaign live at the upgrade rolls up each of its entries once,
// those written before it included.
func RequireUpgradedTo8(t *testing.T, l ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	for id, want := range map[string]ledger.Totals{
		"done":       {Funded: 100, Funding: "ops", GrantCount: 1, GrantCents: 30, Refunded: 70, RefundDone: true},
		"live":       {Funded: 200, Funding: "ops", GrantCount: 2, GrantCents: 150, Escrow: 50},
		"discount:e": {Funded: 50, Funding: "ops", GrantCount: 1, GrantCents: 20, Escrow: 30},
	} {
		tot, err := l.Totals(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, tot, id)
	}
	balances := func(want map[string]int64) {
		t.Helper()
		for id, w := range want {
			b, err := l.Balance(ctx, id)
			require.NoError(t, err)
			require.Equal(t, w, b, id)
		}
	}
	balances(map[string]int64{"user:a": 80, "user:b": 120, "escrow:live": 50, "escrow:discount:e": 30, "funding:ops": -280})
	res, err := l.ApplyGrants(ctx, "live", []ledger.Grant{{Seq: 1, User: "a", Cents: 50}, {Seq: 3, User: "c", Cents: 50}})
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 1, Replayed: 1, InsertedCents: 50}, res)
	balances(map[string]int64{"user:a": 80, "user:b": 120, "user:c": 50, "escrow:live": 0})
	require.NoError(t, l.Refund(ctx, "live", 0))
	require.NoError(t, l.Refund(ctx, "discount:e", 30))
	balances(map[string]int64{"user:a": 80, "user:b": 120, "user:c": 50, "escrow:live": 0, "escrow:discount:e": 0, "funding:ops": -250})
}
