package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

func openTemp(t *testing.T) (*Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l, path
}

// TestSettings checks the connection settings durability depends on.
func TestSettings(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"busy_timeout", "10000"},
	} {
		var got string
		require.NoError(t, l.db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got))
		require.Equal(t, tc.want, got, tc.pragma)
	}
}

// TestBeginImmediate checks that a write transaction holds the write lock
// from BEGIN, before its first statement: another connection (as another
// process would) cannot start writing meanwhile.
func TestBeginImmediate(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	ctx := context.Background()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer other.Close()
	conn, err := other.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	tx, err := l.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.ErrorContains(t, err, "SQLITE_BUSY", "the ledger's BEGIN took the write lock")
	require.NoError(t, tx.Rollback())
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
}

// TestBalancesDerivable checks that the balances table is what the
// entries say, after every kind of write including replays and conflicts.
func TestBalancesDerivable(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "d", Funding: "ops", Total: 50}))
	gs := []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}, {Seq: 2, User: "x", Cents: 200}, {Seq: 3, User: "a", Cents: 1}}
	for range 2 {
		_, err := l.ApplyGrants(ctx, "c", gs)
		require.NoError(t, err)
	}
	_, err := l.ApplyGrants(ctx, "d", []ledger.Grant{{Seq: 1, User: "a", Cents: 7}})
	require.NoError(t, err)
	require.NoError(t, l.Refund(ctx, "c", 700))

	rows, err := l.db.QueryContext(ctx, `
		WITH moves AS (
			SELECT to_account AS id, cents FROM ledger_journal
			UNION ALL SELECT from_account, -cents FROM ledger_journal),
		derived AS (SELECT id, sum(cents) AS sum FROM moves GROUP BY id)
		SELECT a.id, a.balance, coalesce(d.sum, 0) FROM ledger_accounts a LEFT JOIN derived d ON d.id = a.id
		UNION ALL
		SELECT d.id, 0, d.sum FROM derived d WHERE d.id NOT IN (SELECT id FROM ledger_accounts)`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var kept, derived int64
		require.NoError(t, rows.Scan(&id, &kept, &derived))
		require.Equal(t, derived, kept, id)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 5, n) // escrow:c, escrow:d, funding:ops, user:a, user:b; never user:x
}

// TestNoFloats: the STRICT tables refuse a REAL in a money column, so a
// float cannot slip in through another tool writing to the file.
func TestNoFloats(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	_, err := l.db.ExecContext(context.Background(), `INSERT INTO ledger_accounts (id, balance) VALUES ('user:f', 1.5)`)
	require.Error(t, err)
}
