package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUpgradeTo9: a ledger of version 8 gets its identity when it
// migrates to 9, once, though several processes upgrade it at once; the
// identity stays the same afterwards.
func TestUpgradeTo9(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, pool, _ := atVersion(t, 8)
	pool.Close()
	const k = 3
	ids := make([]string, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := Open(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer l.Close()
			ids[i], errs[i] = l.Identity(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Regexp(t, `^ledger-[0-9a-f]{32}$`, ids[0])
	require.Equal(t, []string{ids[0], ids[0], ids[0]}, ids)

	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	var rows int
	var created bool
	require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*), bool_and(created_at <= now()) FROM ledger_identity`).Scan(&rows, &created))
	require.Equal(t, 1, rows)
	require.True(t, created)
	id, err := l.Identity(ctx)
	require.NoError(t, err)
	require.Equal(t, ids[0], id)
}
