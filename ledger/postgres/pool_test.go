package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestNewWithPool: a ledger on the host's pool migrates through it as
// Open does, and its Close leaves the pool open for the host, who closes
// it; a second ledger on the pool, or one opened by DSN, is the same
// ledger. A constructor that fails leaves the pool open too.
func TestNewWithPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.DSN(t)
	var parent string
	{
		conn, err := pgx.Connect(ctx, base)
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&parent))
		require.NoError(t, conn.Close(ctx))
	}
	// A schema the pool's search_path names and nobody made yet: created
	// as Open creates it, and dropped here.
	child := parent + "_pool"
	dsn, err := pgtest.WithSearchPath(base, child)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{child}.Sanitize()+` CASCADE`)
		require.NoError(t, err)
	})
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()

	_, err = NewWithPool(ctx, pool, Existing())
	require.ErrorIs(t, err, ledger.ErrNotMigrated)
	require.NoError(t, pool.Ping(ctx), "a failed constructor closed the host's pool")
	require.False(t, schemaExists(t, child))

	l, err := NewWithPool(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, 15, tables(t, pool, child), "migrated into the pool's schema") // 14 tables and the journal view
	id, err := l.Identity(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 7}))
	require.NoError(t, l.Close())

	require.NoError(t, pool.Ping(ctx), "Close closed the host's pool")
	var funded int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT total FROM ledger_campaigns WHERE id = 'c'`).Scan(&funded))
	require.EqualValues(t, 7, funded, "the host's pool still works, on the ledger's tables too")

	again, err := NewWithPool(ctx, pool, Existing())
	require.NoError(t, err)
	defer again.Close()
	byDSN, err := Open(ctx, dsn, Existing())
	require.NoError(t, err)
	defer byDSN.Close()
	for _, other := range []*Ledger{again, byDSN} {
		got, err := other.Identity(ctx)
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	tot, err := again.Totals(ctx, "c")
	require.NoError(t, err)
	require.EqualValues(t, 7, tot.Escrow)

	_, err = NewWithPool(ctx, nil)
	require.ErrorIs(t, err, ledger.ErrInvalid)
}
