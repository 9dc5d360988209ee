package cli

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger/ledgertest"
)

// TestReconcileMissingLedger: reconcile of a ledger nobody created (a
// mistyped path) fails, says to run hongbao migrate, and creates no file,
// with --balances and with a campaign (the ledger is opened before Redis,
// which is not even dialled here).
func TestReconcileMissingLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"reconcile", "--balances", "--ledger", dsn},
		{"reconcile", "--balances", "--ledger", dsn, "--json"},
		{"reconcile", "--campaign", "c1", "--redis", "redis://127.0.0.1:1", "--ledger", dsn},
	} {
		code, out, errs := run(t, nil, args...)
		require.Equal(t, 1, code, "%v: %s %s", args, out, errs)
		require.Empty(t, out, args)
		require.Contains(t, errs, "not created or not migrated", args)
		require.Contains(t, errs, "hongbao migrate", args)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, ents, "%v created a file", args)
	}
}

// TestMigrateThenReconcile: migrate creates the ledger and reports its
// identity and schema version; again, it changes nothing; reconcile then
// opens it. On both backends.
func TestMigrateThenReconcile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ledger.db") }},
		{"postgres", func(t *testing.T) string { return ledgertest.PostgresDSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := tc.dsn(t)
			code, out, errs := run(t, nil, "reconcile", "--balances", "--ledger", dsn)
			require.Equal(t, 1, code, out)
			require.Contains(t, errs, "hongbao migrate")

			code, out, errs = run(t, nil, "migrate", "--ledger", dsn, "--json")
			require.Equal(t, 0, code, errs)
			var rep migrateReport
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Regexp(t, `^ledger-[0-9a-f]{32}$`, rep.Identity)
			require.Positive(t, rep.SchemaVersion)
			var raw map[string]any
			require.NoError(t, json.Unmarshal([]byte(out), &raw))
			require.Len(t, raw, 2)
			require.Contains(t, raw, "identity")
			require.Contains(t, raw, "schema_version")

			code, out, errs = run(t, nil, "migrate", "--ledger", dsn)
			require.Equal(t, 0, code, errs)
			require.Contains(t, out, "Ledger ready at schema version")
			require.Contains(t, out, "identity "+rep.Identity, "a second migrate keeps the identity")

			code, out, errs = run(t, nil, "reconcile", "--balances", "--ledger", dsn, "--json")
			require.Equal(t, 0, code, errs)
			require.JSONEq(t, `{"accounts":0,"difference_count":0,"journal_sum":0,"stored_sum":0,"pending_sum":0,
				"differences":[],"ok":true}`, out)
		})
	}
}

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--ledger is required"},
		{[]string{"--ledger", "mysql://u:hunter2@h/db"}, "unrecognised ledger DSN"},
		{[]string{"--ledger", filepath.Join(dir, "ledger.txt")}, "unrecognised ledger DSN"},
		{[]string{"--ledger", "sqlite:" + filepath.Join(dir, "l.db"), "extra"}, `unexpected argument "extra"`},
		{[]string{"--nosuchflag"}, "flag provided but not defined"},
	} {
		code, out, errs := run(t, nil, append([]string{"migrate"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s %s", tc.args, out, errs)
		require.Contains(t, errs, tc.want, "%v", tc.args)
		require.NotContains(t, errs, "hunter2", "%v", tc.args)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "a usage error created a file")

	code, out, errs := run(t, nil, "migrate", "--help")
	require.Equal(t, 0, code, out)
	require.Contains(t, errs, "Usage: hongbao migrate --ledger DSN")
	code, out, _ = run(t, nil, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "  migrate ")

	// The environment names the ledger as it does for every command.
	dsn := "sqlite:" + filepath.Join(dir, "env.db")
	code, _, errs = run(t, map[string]string{"HONGBAO_LEDGER": dsn}, "migrate")
	require.Equal(t, 0, code, errs)
	code, _, errs = run(t, nil, "reconcile", "--balances", "--ledger", dsn)
	require.Equal(t, 0, code, errs)
}

// TestMigrateSchemaAhead: a ledger a newer build migrated is an error for
// migrate (exit 1), which changes nothing, and for reconcile.
func TestMigrateSchemaAhead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	dsn := "sqlite:" + path
	code, _, errs := run(t, nil, "migrate", "--ledger", dsn)
	require.Equal(t, 0, code, errs)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO ledger_migrations (version, name) SELECT max(version) + 1, 'newer.sql' FROM ledger_migrations`)
	require.NoError(t, err)
	for _, cmd := range []string{"migrate", "reconcile"} {
		args := []string{cmd, "--ledger", dsn}
		if cmd == "reconcile" {
			args = append(args, "--balances")
		}
		code, _, errs = run(t, nil, args...)
		require.Equal(t, 1, code, "%s: %s", cmd, errs)
		require.Contains(t, errs, "schema newer than this build", cmd)
	}
}
