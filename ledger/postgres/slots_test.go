package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestCounterSlotsShared: more writers of one campaign than there are
// counter slots (each ledger's connections pick a slot by their backend's
// pid), all at once, each writing its own grants in small batches: slots
// are shared, and the counters still add up to the grants exactly.
func TestCounterSlotsShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const ledgers, perLedger, batches, size = 5, 4, 10, 7
	ls := make([]*Ledger, ledgers)
	for i := range ls {
		l, err := Open(ctx, dsn)
		require.NoError(t, err)
		defer l.Close()
		ls[i] = l
	}
	const writers = ledgers * perLedger
	total := int64(writers * batches * size * 2)
	require.NoError(t, ls[0].Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: total + 1}))
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			l := ls[w%ledgers]
			for b := range batches {
				gs := make([]ledger.Grant, size)
				for i := range gs {
					seq := int64(((w*batches)+b)*size + i + 1)
					gs[i] = ledger.Grant{Seq: seq, User: fmt.Sprintf("u%d", seq), Cents: 2}
				}
				res, err := l.ApplyGrants(ctx, "c", gs)
				if err == nil && res.Inserted != size {
					err = fmt.Errorf("inserted %d of %d", res.Inserted, size)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	var slots, count, cents int64
	require.NoError(t, ls[0].pool.QueryRow(ctx, `SELECT count(*), sum(count)::bigint, sum(cents)::bigint
		FROM ledger_campaign_counts`).Scan(&slots, &count, &cents))
	require.LessOrEqual(t, slots, int64(16))
	require.EqualValues(t, writers*batches*size, count)
	require.Equal(t, total, cents)
	tot, err := ls[1].Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: total + 1, Funding: "ops", GrantCount: count, GrantCents: total, Escrow: 1}, tot)
	require.NoError(t, ls[2].Refund(ctx, "c", 1))
	t.Logf("%d writers over %d counter rows", writers, slots)
}
