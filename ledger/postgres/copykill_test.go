package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestCopyKilledMidway: the server ends a connection in the middle of a
// grant COPY (a restart, an administrator's pg_terminate_backend). pgx
// then returns from the COPY without waiting for the goroutine that
// reads the batch's text, which may still read it; the next batch, on
// another connection, must still send every one of its grants and no
// goroutine may touch the text of another batch (run with -race).
func TestCopyKilledMidway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	const rounds, big, small = 12, 200_000, 500
	bigBatch := make([]ledger.Grant, big)
	for i := range bigBatch {
		bigBatch[i] = ledger.Grant{Seq: int64(i + 1), User: fmt.Sprintf("big-user-%09d", i), Cents: 1}
	}
	for r := range rounds {
		id := fmt.Sprintf("c%d", r)
		require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "ops", Total: 1 << 40}))
		var num int64
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT num FROM ledger_campaigns WHERE id = $1`, id).Scan(&num))

		victim, err := l.pool.Acquire(ctx)
		require.NoError(t, err)
		pid := victim.Conn().PgConn().PID()
		done := make(chan error, 1)
		go func() {
			_, err := copyText(ctx, victim.Conn().PgConn(), num, bigBatch)
			done <- err
		}()
		require.Eventually(t, func() bool {
			var copying bool
			err := l.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE pid = $1 AND state = 'active' AND query LIKE 'COPY%')`, pid).Scan(&copying)
			return err == nil && copying
		}, 10*time.Second, time.Millisecond)
		time.Sleep(time.Duration(r) * time.Millisecond)
		_, err = l.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		require.NoError(t, err)
		require.Error(t, <-done, "round %d: the killed COPY", r)
		victim.Release()

		// The next batch, at once, on a healthy connection.
		gs := make([]ledger.Grant, small)
		for i := range gs {
			gs[i] = ledger.Grant{Seq: int64(big + i + 1), User: fmt.Sprintf("next-%d-%d", r, i), Cents: 1}
		}
		conn, err := l.pool.Acquire(ctx)
		require.NoError(t, err)
		n, err := copyText(ctx, conn.Conn().PgConn(), num, gs)
		conn.Release()
		require.NoError(t, err, "round %d", r)
		require.EqualValues(t, small, n, "round %d: grants the next COPY wrote", r)
		var stored int64
		require.NoError(t, l.pool.QueryRow(ctx, `SELECT count(*) FROM ledger_grants WHERE campaign = $1`, num).Scan(&stored))
		require.EqualValues(t, small, stored, "round %d", r)
	}
}
