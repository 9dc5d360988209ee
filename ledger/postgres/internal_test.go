package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestBalancesDerivable checks that the balances table is what the
// entries say, after every kind of write including replays and conflicts.
func TestBalancesDerivable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "d", Funding: "ops", Total: 50}))
	gs := []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}, {Seq: 2, User: "x", Cents: 200}, {Seq: 3, User: "a", Cents: 1}}
	_, err = l.ApplyGrants(ctx, "c", gs)
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "c", gs)
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "d", []ledger.Grant{{Seq: 1, User: "a", Cents: 7}})
	require.NoError(t, err)
	require.NoError(t, l.Refund(ctx, "c", 700))

	rows, _ := l.pool.Query(ctx, `
		WITH moves AS (
			SELECT to_account AS id, cents FROM ledger_journal
			UNION ALL SELECT from_account, -cents FROM ledger_journal)
		SELECT coalesce(a.id, m.id), coalesce(a.balance, 0), coalesce(m.sum, 0)
		FROM ledger_accounts a FULL JOIN (SELECT id, sum(cents) FROM moves GROUP BY id) m ON m.id = a.id`)
	type acct struct {
		ID            string
		Kept, Derived int64
	}
	accts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[acct])
	require.NoError(t, err)
	require.Len(t, accts, 5) // escrow:c, escrow:d, funding:ops, user:a, user:b; never user:x
	for _, a := range accts {
		require.Equal(t, a.Derived, a.Kept, a.ID)
	}
}

// TestOpenCreatesSchema: a search_path naming a schema that does not exist
// yet gets it created, so "?search_path=hongbao" is all a deployment needs.
func TestOpenCreatesSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.DSN(t) // a schema of our own, dropped at the end
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var parent string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&parent))
	child := parent + "_Ledger"
	dsn, err := pgtest.WithSearchPath(base, `"`+child+`"`)
	require.NoError(t, err)
	// Registered after pgtest's cleanup, so it runs first; conn is closed
	// by then, so it connects anew.
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{child}.Sanitize()+` CASCADE`)
		require.NoError(t, err)
	})
	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, child).Scan(&n))
	require.Equal(t, 6, n) // 5 tables and the journal view
}

func TestFirstSchema(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                "",
		"s":               "s",
		" s , public":     "s",
		`"My ""S"", x`:    `My "S"`,
		`"$user", public`: "", // PostgreSQL's default: the role's schema, not ours to create
		`$user, public`:   "",
	} {
		require.Equal(t, want, firstSchema(in), in)
	}
}
