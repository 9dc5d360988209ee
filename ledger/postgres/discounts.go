package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
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
	ds, err := batch.CheckDiscounts(campaign, discounts)
	if err != nil || len(ds) == 0 {
		return ledger.DiscountResult{}, err
	}
	users, orders := make([]string, len(ds)), make([]string, len(ds))
	seqs, cents := make([]int64, len(ds)), make([]int64, len(ds))
	for i, d := range ds {
		users[i], orders[i], seqs[i], cents[i] = d.User, d.Order, d.Seq, d.Cents
	}
	var res ledger.DiscountResult
	err = l.tx(ctx, func(tx pgx.Tx) error {
		num, refunded, err := shareCampaignRow(ctx, tx, "discount", campaign)
		if err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, insertDiscounts, num, users, orders, seqs, cents)
		inserted, err := pgx.CollectRows(rows, scanDiscount)
		if err != nil {
			return err
		}
		var stored []batch.DiscountRow
		if ms, mu, mo := batch.MissingDiscounts(ds, inserted); ms != nil {
			rows, _ := tx.Query(ctx, lookupDiscounts, num, ms, mu, mo)
			if stored, err = pgx.CollectRows(rows, scanDiscount); err != nil {
				return err
			}
		}
		r, _, err := batch.ClassifyDiscounts(ds, inserted, stored)
		if err != nil {
			return err
		}
		res = r
		return debit(ctx, tx, "discount", campaign, num, refunded, r.Inserted, r.InsertedCents)
	})
	if err != nil {
		return ledger.DiscountResult{}, wrap("apply discounts", err)
	}
	return res, nil
}

func scanDiscount(row pgx.CollectableRow) (batch.DiscountRow, error) {
	var r batch.DiscountRow
	err := row.Scan(&r.User, &r.Order, &r.Seq, &r.Cents)
	return r, err
}

// Discounts implements ledger.Ledger. It streams the rows.
func (l *Ledger) Discounts(ctx context.Context, campaign string, fn func(ledger.Discount) error) error {
	rows, err := l.pool.Query(ctx, `SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
		WHERE c.id = $1 ORDER BY d.seq`, campaign)
	if err != nil {
		return wrap("discounts", err)
	}
	defer rows.Close()
	for rows.Next() {
		d := ledger.Discount{Campaign: campaign}
		if err := rows.Scan(&d.User, &d.Order, &d.Seq, &d.Cents); err != nil {
			return wrap("discounts", err)
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return wrap("discounts", rows.Err())
}
