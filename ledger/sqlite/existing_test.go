package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// requireNotMigrated checks that err is ErrNotMigrated and tells the
// operator what to run.
func requireNotMigrated(t *testing.T, err error, says string) {
	t.Helper()
	require.ErrorIs(t, err, ledger.ErrNotMigrated)
	require.ErrorContains(t, err, says)
	require.ErrorContains(t, err, "hongbao migrate")
}

// TestExistingMissingFile: opened with Existing, a file that is not there
// is ErrNotMigrated and is not created, in each form of path.
func TestExistingMissingFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "typo.db")
	for _, dsn := range []string{path, "sqlite:" + path, "file:" + path, "file:" + path + "?cache=private", "file://" + path} {
		l, err := Open(context.Background(), dsn, Existing())
		requireNotMigrated(t, err, "no file "+path)
		require.Nil(t, l)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, ents, "%s: a file was created", dsn)
	}
	_, err := Open(context.Background(), dir, Existing())
	require.ErrorIs(t, err, ledger.ErrInvalid, "a directory")
}

// TestExistingCreatesNothing: opened with Existing, a file without the
// ledger's tables and a ledger behind this build's migrations are
// ErrNotMigrated, and no table or migration is added.
func TestExistingCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err := Open(ctx, empty, Existing())
	requireNotMigrated(t, err, "no ledger tables")
	n := len(mustLoad(t))
	path, db, _ := atVersion(t, n-1)
	defer db.Close()
	_, err = Open(ctx, "sqlite:"+path, Existing())
	requireNotMigrated(t, err, fmt.Sprintf("schema version %d, this build needs %d", n-1, n))
	// ledger_grants.granted_ms is a column of the last migration (0012).
	var have, cols int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT max(version), (SELECT count(*) FROM pragma_table_info('ledger_grants') WHERE name = 'granted_ms')
		FROM ledger_migrations`).Scan(&have, &cols))
	require.Equal(t, n-1, have, "a migration was applied")
	require.Zero(t, cols)

	check, err := sql.Open("sqlite", "file:"+empty+"?mode=ro")
	require.NoError(t, err)
	defer check.Close()
	var tables int
	require.NoError(t, check.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables))
	require.Zero(t, tables, "a table was created")
}

func mustLoad(t *testing.T) []string {
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
	made, path := openTemp(t)
	require.NoError(t, made.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 5}))
	l, err := Open(ctx, path, Existing())
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
	l, path := openTemp(t)
	n := len(mustLoad(t))
	_, err := l.db.ExecContext(ctx, `INSERT INTO ledger_migrations (version, name) VALUES (?, 'from_a_newer_build.sql')`, n+1)
	require.NoError(t, err)
	for _, opts := range [][]Option{nil, {Existing()}} {
		_, err := Open(ctx, path, opts...)
		require.ErrorIs(t, err, ledger.ErrSchemaAhead)
		require.ErrorContains(t, err, fmt.Sprintf("schema version %d, this build knows %d", n+1, n))
	}
	v, err := l.SchemaVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, n+1, v)
}
