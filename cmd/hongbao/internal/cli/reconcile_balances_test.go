package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/sqlite"
)

// balancesLedger writes a small ledger into a new SQLite file: campaign c
// settled and rolled up, d live. It returns the file's path.
func balancesLedger(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	l, err := sqlite.Open(ctx, path)
	require.NoError(t, err)
	defer l.Close()
	for _, c := range []ledger.Campaign{{ID: "c", Funding: "ops", Total: 1000}, {ID: "d", Funding: "ops", Total: 50}} {
		require.NoError(t, l.Fund(ctx, c))
	}
	_, err = l.ApplyGrants(ctx, "c", []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}})
	require.NoError(t, err)
	require.NoError(t, l.Refund(ctx, "c", 700))
	_, err = l.RollUp(ctx, "c")
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "d", []ledger.Grant{{Seq: 1, User: "a", Cents: 7}})
	require.NoError(t, err)
	return path
}

func TestReconcileBalances(t *testing.T) {
	t.Parallel()
	path := balancesLedger(t)
	dsn := "sqlite:" + path
	code, out, errs := run(t, nil, "reconcile", "--balances", "--ledger", dsn)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Balances of the ledger: 5 accounts")
	require.Contains(t, out, "stored sum -0.07   not rolled up yet 0.07")
	require.Contains(t, out, "OK: every stored balance")

	code, out, errs = run(t, nil, "reconcile", "--balances", "--ledger", dsn, "--json")
	require.Equal(t, 0, code, errs)
	require.JSONEq(t, `{"accounts":5,"difference_count":0,"journal_sum":0,"stored_sum":-7,"pending_sum":7,
		"differences":[],"ok":true}`, out)

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`UPDATE ledger_accounts SET balance = balance + 5 WHERE id = 'user:a'`)
	require.NoError(t, err)

	code, out, errs = run(t, nil, "reconcile", "--balances", "--ledger", dsn)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "2 differences:")
	require.Contains(t, out, "user:a: stored 1.05, the journal derives 1.00 (with 0.07 not rolled up yet: balance 1.07)")
	require.Contains(t, out, "the stored balances and the credits not rolled up sum to 0.05, not 0")
	require.Contains(t, errs, "2 differences")

	code, out, _ = run(t, nil, "reconcile", "--balances", "--ledger", dsn, "--json")
	require.Equal(t, 1, code)
	var rep balancesReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.OK)
	require.Equal(t, []ledger.BalanceDifference{{Account: "user:a", Stored: 105, Derived: 100, Pending: 7}}, rep.Differences)
	require.EqualValues(t, 1, rep.BalanceCheck.Differences)
	require.EqualValues(t, -2, rep.StoredSum)
}

func TestReconcileBalancesUsage(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "l.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--balances", "--campaign", "c1", "--ledger", dsn}, "not both"},
		{[]string{"--balances", "--discount", "c1", "--ledger", dsn}, "not both"},
		{[]string{"--balances"}, "--ledger is required"},
	} {
		code, _, errs := run(t, nil, append([]string{"reconcile"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.want, "%v", tc.args)
	}
	code, _, errs := run(t, nil, "reconcile", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, errs, "hongbao reconcile --balances --ledger DSN")
}
