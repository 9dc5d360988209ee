package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// ApplyDiscounts implements ledger.Ledger, as ApplyGrants does grants: the
// write lock is held from BEGIN, so every discount the insert skipped
// finds the row it collided with. User balances are rolled up by the
// refund. An empty batch is a no-op.
func (l *Ledger) ApplyDiscounts(ctx context.Context, campaign string, discounts []ledger.Discount) (ledger.DiscountResult, error) {
	ds, err := batch.CheckDiscounts(campaign, discounts)
	if err != nil || len(ds) == 0 {
		return ledger.DiscountResult{}, err
	}
	var res ledger.DiscountResult
	err = l.tx(ctx, func(tx *sql.Tx) error {
		num, refunded, err := campaignRow(ctx, tx, "discount", campaign)
		if err != nil {
			return err
		}
		var inserted, stored []batch.DiscountRow
		for start := 0; start < len(ds); start += rowsPerInsert {
			if inserted, err = insertDiscounts(ctx, tx, num, ds[start:min(start+rowsPerInsert, len(ds))], inserted); err != nil {
				return err
			}
		}
		if seqs, users, orders := batch.MissingDiscounts(ds, inserted); seqs != nil {
			if stored, err = lookupDiscounts(ctx, tx, num, seqs, users, orders); err != nil {
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
	return scanDiscounts(rows, into)
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
	return scanDiscounts(rows, nil)
}

func scanDiscounts(rows *sql.Rows, into []batch.DiscountRow) ([]batch.DiscountRow, error) {
	defer rows.Close()
	for rows.Next() {
		var r batch.DiscountRow
		if err := rows.Scan(&r.User, &r.Order, &r.Seq, &r.Cents); err != nil {
			return nil, err
		}
		into = append(into, r)
	}
	return into, rows.Err()
}

// Discounts implements ledger.Ledger. It streams the rows.
func (l *Ledger) Discounts(ctx context.Context, campaign string, fn func(ledger.Discount) error) error {
	rows, err := l.db.QueryContext(ctx, `SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
		WHERE c.id = ? ORDER BY d.seq`, campaign)
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
