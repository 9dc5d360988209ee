package query

import (
	"context"

	"github.com/hongbao/hongbao/ledger"
)

// Query runs a statement and answers its rows: a pool's or a
// transaction's Query, bound to neither driver.
type Query func(ctx context.Context, sql string, args ...any) (Rows, error)

// QueryOf is query (pgx's or database/sql's, of a pool or a transaction)
// as a Query.
func QueryOf[R Rows](query func(ctx context.Context, sql string, args ...any) (R, error)) Query {
	return func(ctx context.Context, sql string, args ...any) (Rows, error) { return query(ctx, sql, args...) }
}

// Snapshot runs fn in one read-only transaction of the backend whose
// statements all read one snapshot, giving fn that transaction's Query.
// It takes no lock a writer waits for.
type Snapshot func(ctx context.Context, fn func(Query) error) error

// checkBalances answers, for every account that ledger_accounts or the
// journal names, in account order: its stored balance, the sum of its
// journal entries (to it minus from it) and its credits from campaigns
// not rolled up yet. It reads the tables under the ledger_journal view
// directly, so that an escrow's grants are summed per campaign before
// they meet the accounts and a user's credits carry their campaign's
// rolled_up. The statement is the same in both dialects: PostgreSQL reads
// rolled_up as a boolean, SQLite as 0 or 1, and both take CAST AS BIGINT
// (PostgreSQL's sum of BIGINT is NUMERIC).
const checkBalances = `WITH moves (id, stored, journal, pending) AS (
		SELECT id, balance, 0, 0 FROM ledger_accounts
		UNION ALL SELECT from_account, 0, -cents, 0 FROM ledger_entries
		UNION ALL SELECT to_account, 0, cents, 0 FROM ledger_entries
		UNION ALL SELECT 'escrow:' || c.id, 0, -g.cents, 0 FROM ledger_campaigns c
			JOIN (SELECT campaign, sum(cents) AS cents FROM ledger_grants GROUP BY campaign) g ON g.campaign = c.num
		UNION ALL SELECT 'escrow:' || c.id, 0, -d.cents, 0 FROM ledger_campaigns c
			JOIN (SELECT campaign, sum(cents) AS cents FROM ledger_discounts GROUP BY campaign) d ON d.campaign = c.num
		UNION ALL SELECT 'user:' || g.user_id, 0, g.cents, CASE WHEN c.rolled_up THEN 0 ELSE g.cents END
			FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
		UNION ALL SELECT 'user:' || d.user_id, 0, d.cents, CASE WHEN c.rolled_up THEN 0 ELSE d.cents END
			FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign)
	SELECT id, CAST(sum(stored) AS BIGINT), CAST(sum(journal) AS BIGINT), CAST(sum(pending) AS BIGINT)
	FROM moves GROUP BY id ORDER BY id`

// CheckBalances implements ledger.Ledger: one statement, run in the
// backend's snapshot, streamed; only the accounts that differ reach fn.
func (r Reads) CheckBalances(ctx context.Context, fn func(ledger.BalanceDifference) error) (ledger.BalanceCheck, error) {
	const op = "check balances"
	var c ledger.BalanceCheck
	var d ledger.BalanceDifference
	var journal int64
	dest := []any{&d.Account, &d.Stored, &journal, &d.Pending}
	var fnErr error
	err := r.snapshot(ctx, func(q Query) error {
		c = ledger.BalanceCheck{}
		in := r
		in.query = q
		return stream(ctx, in, op, func(rows Rows) (ledger.BalanceDifference, error) {
			err := rows.Scan(dest...)
			d.Derived = journal - d.Pending
			return d, err
		}, func(d ledger.BalanceDifference) error {
			c.Accounts++
			c.JournalSum += d.Derived + d.Pending
			c.StoredSum += d.Stored
			c.PendingSum += d.Pending
			if d.Stored == d.Derived {
				return nil
			}
			c.Differences++
			fnErr = fn(d)
			return fnErr
		}, checkBalances)
	})
	if fnErr != nil {
		return c, fnErr
	}
	return c, r.wrap(op, err)
}
