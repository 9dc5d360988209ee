package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// schemaExists reports whether the schema exists, read on a connection
// of its own.
func schemaExists(t *testing.T, schema string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Server(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var ok bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok))
	return ok
}

// tables counts the tables and views of the schema.
func tables(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&n))
	return n
}

// requireNotMigrated checks that err is ErrNotMigrated and tells the
// operator what to run.
func requireNotMigrated(t *testing.T, err error, says string) {
	t.Helper()
	require.ErrorIs(t, err, ledger.ErrNotMigrated)
	require.ErrorContains(t, err, says)
	require.ErrorContains(t, err, "hongbao migrate")
}

// TestExistingCreatesNothing: opened with Existing, a schema that is
// missing, one without the ledger's tables and one behind this build's
// migrations are ErrNotMigrated, and are left as they were: the schema
// is not created, no table is, no migration is applied.
func TestExistingCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	var b [8]byte
	_, _ = rand.Read(b[:])
	missing := "hbtest_missing_" + hex.EncodeToString(b[:])
	dsn, err := pgtest.WithSearchPath(pgtest.Server(t), missing)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Only if the test failed and made it.
		conn, err := pgx.Connect(context.Background(), pgtest.Server(t))
		if err == nil {
			_, _ = conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{missing}.Sanitize()+` CASCADE`)
			_ = conn.Close(context.Background())
		}
	})
	l, err := Open(ctx, dsn, Existing())
	requireNotMigrated(t, err, `no schema "`+missing+`"`)
	require.Nil(t, l)
	require.False(t, schemaExists(t, missing), "the schema was created")

	empty := pgtest.DSN(t)
	_, err = Open(ctx, empty, Existing())
	requireNotMigrated(t, err, "no ledger tables in schema")
	pool, err := pgxpool.New(ctx, empty)
	require.NoError(t, err)
	defer pool.Close()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	require.Zero(t, tables(t, pool, schema), "a table was created")

	n := len(loadedMigrations(t))
	behind, old, ms := atVersion(t, n-1)
	defer old.Close()
	_, err = Open(ctx, behind, Existing())
	requireNotMigrated(t, err, fmt.Sprintf("schema version %d, this build needs %d", n-1, n))
	var have int
	require.NoError(t, old.QueryRow(ctx, `SELECT max(version) FROM ledger_migrations`).Scan(&have))
	require.Equal(t, len(ms)-1, have, "a migration was applied")
	// ledger_grants.granted_ms is a column of the last migration (0012).
	require.NoError(t, old.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'ledger_grants' AND column_name = 'granted_ms'`).Scan(&have))
	require.Zero(t, have)
}

func loadedMigrations(t *testing.T) []string {
	t.Helper()
	ms, err := loadMigrations()
	require.NoError(t, err)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return names
}

// TestExistingOpens: a ledger at this build's version opens with
// Existing, and is the same ledger (its identity, its rows).
func TestExistingOpens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	made, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer made.Close()
	require.NoError(t, made.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 5}))
	l, err := Open(ctx, dsn, Existing())
	require.NoError(t, err)
	defer l.Close()
	want, err := made.Identity(ctx)
	require.NoError(t, err)
	got, err := l.Identity(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 5, tot.Funded)
}

// TestSchemaAhead: a ledger a newer build migrated is refused, with or
// without Existing, and left as it is.
func TestSchemaAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	n := len(loadedMigrations(t))
	_, err = l.pool.Exec(ctx, `INSERT INTO ledger_migrations (version, name) VALUES ($1, 'from_a_newer_build.sql')`, n+1)
	require.NoError(t, err)
	for _, opts := range [][]Option{nil, {Existing()}} {
		_, err := Open(ctx, dsn, opts...)
		require.ErrorIs(t, err, ledger.ErrSchemaAhead)
		require.ErrorContains(t, err, fmt.Sprintf("schema version %d, this build knows %d", n+1, n))
	}
	v, err := l.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, n+1, v)
}
