package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

const insertDiscounts = `INSERT INTO ledger_discounts (campaign, user_id, order_id, seq, cents)
SELECT $1, d.user_id, d.order_id, d.seq, d.cents
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS d(user_id, order_id, seq, cents, ord)
ORDER BY d.ord
ON CONFLICT DO NOTHING
RETURNING user_id, order_id, seq, cents`

const lookupDiscounts = `SELECT user_id, order_id, seq, cents FROM ledger_discounts
WHERE campaign = $1 AND (seq = ANY($2) OR (user_id, order_id) IN (SELECT * FROM unnest($3::text[], $4::text[])))`

// ApplyDiscounts implements ledger.Ledger, as ApplyGrants does grants: the
// campaign row is read FOR SHARE, so batches of one campaign run side by
// side; an insert that meets another batch's uncommitted key waits for
// its commit, so every discount the insert skipped finds its committed
// counterpart. User balances are rolled up after the refund (RollUp). An empty batch
// is a no-op.
func (l *Ledger) ApplyDiscounts(ctx context.Context, campaign string, discounts []ledger.Discount) (ledger.DiscountResult, error) {
	return query.Apply(ctx, l.writes(), query.Discounts, campaign, discounts, func(tx pgx.Tx, num int64, ds []ledger.Discount) (ledger.DiscountResult, error) {
		users, orders := make([]string, len(ds)), make([]string, len(ds))
		seqs, cents := make([]int64, len(ds)), make([]int64, len(ds))
		for i, d := range ds {
			users[i], orders[i], seqs[i], cents[i] = d.User, d.Order, d.Seq, d.Cents
		}
		rows, _ := tx.Query(ctx, insertDiscounts, num, users, orders, seqs, cents)
		inserted, err := query.Append(rows, query.DiscountRows(), nil)
		if err != nil {
			return ledger.DiscountResult{}, err
		}
		var stored []batch.DiscountRow
		if ms, mu, mo := batch.MissingDiscounts(ds, inserted); ms != nil {
			rows, _ := tx.Query(ctx, lookupDiscounts, num, ms, mu, mo)
			if stored, err = query.Append(rows, query.DiscountRows(), nil); err != nil {
				return ledger.DiscountResult{}, err
			}
		}
		r, _, err := batch.ClassifyDiscounts(ds, inserted, stored)
		return r, err
	})
}
