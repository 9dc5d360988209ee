package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// ApplyDiscounts implements ledger.Ledger, as ApplyGrants does grants: the
// write lock is held from BEGIN, so every discount the insert skipped
// finds the row it collided with. User balances are rolled up by the
// refund. An empty batch is a no-op.
func (l *Ledger) ApplyDiscounts(ctx context.Context, campaign string, discounts []ledger.Discount) (ledger.DiscountResult, error) {
	return query.Apply(ctx, l.writes(), query.Discounts, campaign, discounts, func(tx *sql.Tx, num int64, ds []ledger.Discount) (ledger.DiscountResult, error) {
		var inserted, stored []batch.DiscountRow
		var err error
		for start := 0; start < len(ds); start += rowsPerInsert {
			if inserted, err = insertDiscounts(ctx, tx, num, ds[start:min(start+rowsPerInsert, len(ds))], inserted); err != nil {
				return ledger.DiscountResult{}, err
			}
		}
		if seqs, users, orders := batch.MissingDiscounts(ds, inserted); seqs != nil {
			if stored, err = lookupDiscounts(ctx, tx, num, seqs, users, orders); err != nil {
				return ledger.DiscountResult{}, err
			}
		}
		r, _, err := batch.ClassifyDiscounts(ds, inserted, stored)
		return r, err
	})
}

// insertDiscounts inserts discounts with one multi-row statement, in batch
// order, and appends the rows actually inserted to into.
func insertDiscounts(ctx context.Context, tx *sql.Tx, num int64, ds []ledger.Discount, into []batch.DiscountRow) ([]batch.DiscountRow, error) {
	var q strings.Builder
	q.WriteString(`INSERT INTO ledger_discounts (campaign, user_id, order_id, seq, cents) VALUES `)
	args := make([]any, 0, 5*len(ds))
	for i, d := range ds {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(?,?,?,?,?)`)
		args = append(args, num, d.User, d.Order, d.Seq, d.Cents)
	}
	q.WriteString(` ON CONFLICT DO NOTHING RETURNING user_id, order_id, seq, cents`)
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	return query.Append(rows, query.DiscountRows(), into)
}

// lookupDiscounts reads the stored discounts holding any of the given
// units or orders.
func lookupDiscounts(ctx context.Context, tx *sql.Tx, num int64, seqs []int64, users, orders []string) ([]batch.DiscountRow, error) {
	pairs := make([][2]string, len(users))
	for i := range users {
		pairs[i] = [2]string{users[i], orders[i]}
	}
	rows, err := tx.QueryContext(ctx, `SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM json_each(?2) AS j CROSS JOIN ledger_discounts AS d
		WHERE d.campaign = ?1 AND d.seq = j.value
		UNION
		SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM json_each(?3) AS j CROSS JOIN ledger_discounts AS d
		WHERE d.campaign = ?1 AND d.user_id = json_extract(j.value, '$[0]') AND d.order_id = json_extract(j.value, '$[1]')`,
		num, jsonArray(seqs), jsonArray(pairs))
	if err != nil {
		return nil, err
	}
	return query.Append(rows, query.DiscountRows(), nil)
}
