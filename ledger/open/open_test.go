package open_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
