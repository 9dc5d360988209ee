package open_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
	"github.com/hongbao/hongbao/ledger/open"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite prefix", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ledger") }},
		{"db suffix", func(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger.db") }},
		{"file uri", func(t *testing.T) string { return "file:" + filepath.Join(t.TempDir(), "ledger.sqlite") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l, err := open.Open(ctx, tc.dsn(t))
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			require.NoError(t, l.Ping(ctx))
			require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 5}))
			b, err := l.Balance(ctx, "escrow:c")
			require.NoError(t, err)
			require.Equal(t, int64(5), b)
		})
	}
}

func TestOpenUnknown(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "mysql://u:secret@h/db", "ledger.txt"} {
		l, err := open.Open(context.Background(), dsn)
		require.ErrorIs(t, err, ledger.ErrInvalid, dsn)
		require.Nil(t, l)
		require.NotContains(t, err.Error(), "secret")
	}
}

// TestOpenExisting: OpenExisting refuses a ledger nobody created, and
// creates nothing (the SQLite file, the PostgreSQL schema's tables);
// once Open made it, OpenExisting opens the same ledger.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dsn  func(t *testing.T) (dsn string, created func() bool)
	}{
		{"sqlite", func(t *testing.T) (string, func() bool) {
			path := filepath.Join(t.TempDir(), "typo.db")
			return "sqlite:" + path, func() bool { _, err := os.Stat(path); return err == nil }
		}},
		{"postgres", func(t *testing.T) (string, func() bool) {
			dsn := pgtest.DSN(t)
			return dsn, func() bool {
				pool, err := pgxpool.New(context.Background(), dsn)
				require.NoError(t, err)
				defer pool.Close()
				var n int
				require.NoError(t, pool.QueryRow(context.Background(),
					`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n))
				return n > 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn, created := tc.dsn(t)
			l, err := open.OpenExisting(ctx, dsn)
			require.ErrorIs(t, err, ledger.ErrNotMigrated)
			require.ErrorContains(t, err, "hongbao migrate")
			require.Nil(t, l)
			require.False(t, created(), "OpenExisting created the ledger")

			made, err := open.Open(ctx, dsn)
			require.NoError(t, err)
			defer func() { require.NoError(t, made.Close()) }()
			l, err = open.OpenExisting(ctx, dsn)
			require.NoError(t, err)
			defer func() { require.NoError(t, l.Close()) }()
			want, err := made.Identity(ctx)
			require.NoError(t, err)
			got, err := l.Identity(ctx)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
	l, err := open.OpenExisting(context.Background(), "mysql://u:secret@h/db")
	require.ErrorIs(t, err, ledger.ErrInvalid)
	require.Nil(t, l)
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"sqlite:x", "x.db", "file:x", "postgres://h/db", "postgresql://h/db"} {
		require.NoError(t, open.Check(dsn), dsn)
	}
	for _, dsn := range []string{"", "mysql://u:secret@h/db", "ledger.txt"} {
		err := open.Check(dsn)
		require.ErrorIs(t, err, ledger.ErrInvalid, dsn)
		require.NotContains(t, err.Error(), "secret")
	}
}
