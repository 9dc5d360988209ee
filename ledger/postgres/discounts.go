package postgres

import (
	"context"
	"sort"

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
// campaign row is locked first, so batches of one campaign run one after
// the other and every discount the insert skipped finds its committed
// counterpart. An empty batch is a no-op.
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
		num, escrowCents, refunded, err := lockCampaignRow(ctx, tx, "discount", campaign)
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
		r, done, err := batch.ClassifyDiscounts(ds, inserted, stored)
		if err != nil {
			return err
		}
		if err := batch.Debit("discount", campaign, refunded, escrowCents, r.InsertedCents, r.Inserted); err != nil {
			return err
		}
		res = r
		return creditDiscounts(ctx, tx, campaign, r, done)
	})
	if err != nil {
		return ledger.DiscountResult{}, wrap("apply discounts", err)
	}
	return res, nil
}

// creditDiscounts moves the balances of the discounts inserted: users up
// (in id order, as everywhere, so campaigns paying the same users cannot
// deadlock), escrow down, and the campaign's counters.
func creditDiscounts(ctx context.Context, tx pgx.Tx, campaign string, r ledger.DiscountResult, done []ledger.Discount) error {
	if len(done) == 0 {
		return nil
	}
	sort.Slice(done, func(i, j int) bool { return done[i].User < done[j].User })
	accts, amounts := make([]string, len(done)), make([]int64, len(done))
	for i, d := range done {
		accts[i], amounts[i] = ledger.UserAccount(d.User), d.Cents
	}
	b := &pgx.Batch{}
	// One row per account: a user with two orders in the batch is summed
	// first, since one INSERT ... ON CONFLICT cannot touch a row twice.
	b.Queue(`INSERT INTO ledger_accounts (id, balance)
		SELECT id, sum(c) FROM unnest($1::text[], $2::bigint[]) AS a(id, c) GROUP BY id ORDER BY id
		ON CONFLICT (id) DO UPDATE SET balance = ledger_accounts.balance + excluded.balance`, accts, amounts)
	b.Queue(`UPDATE ledger_accounts SET balance = balance - $2 WHERE id = $1`, ledger.EscrowAccount(campaign), r.InsertedCents)
	b.Queue(`UPDATE ledger_campaigns SET grant_count = grant_count + $2, grant_cents = grant_cents + $3
		WHERE id = $1`, campaign, r.Inserted, r.InsertedCents)
	return tx.SendBatch(ctx, b).Close()
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
