package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hongbao/hongbao/ledger/internal/query"
)

// reads are the reads of ledger.Ledger, written once for both backends
// (query.Reads), embedded in Ledger under a name of this package's own.
type reads = query.Reads

// snapshot runs a read of many rows (CheckBalances) in a READ ONLY
// REPEATABLE READ transaction: every statement of it sees the database
// as of its first, whatever commits meanwhile, and it locks nothing a
// writer waits for (only the tables' ACCESS SHARE, which DDL alone
// conflicts with). While it runs, VACUUM keeps the row versions it may
// still read.
func snapshot(pool *pgxpool.Pool) query.Snapshot {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return func(ctx context.Context, fn func(query.Query) error) error {
		return pgx.BeginTxFunc(ctx, pool, opts, func(tx pgx.Tx) error { return fn(query.QueryOf(tx.Query)) })
	}
}

// statements are the reads' SQL.
var statements = query.Statements{
	PacketSetNum: `SELECT num FROM ledger_packet_sets WHERE id = $1`,
	Packets:      `SELECT seq, cents FROM ledger_packets WHERE campaign = $1 ORDER BY seq`,
	// Both primary keys are in seq order, and PostgreSQL merges them.
	UngrantedPackets: `SELECT p.seq, p.cents FROM ledger_packets p
		WHERE p.campaign = $1 AND NOT EXISTS (
			SELECT 1 FROM ledger_grants g
			WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = $2) AND g.seq = p.seq)
		ORDER BY p.seq`,
	MismatchedGrants: `SELECT g.seq, g.user_id, g.cents, coalesce(p.cents, 0)
		FROM ledger_grants g LEFT JOIN ledger_packets p ON p.campaign = $1 AND p.seq = g.seq
		WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = $2) AND p.cents IS DISTINCT FROM g.cents
		ORDER BY g.seq`,
	Grants: `SELECT g.seq, g.user_id, g.cents
		FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
		WHERE c.id = $1 ORDER BY g.seq`,
	Discounts: `SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
		WHERE c.id = $1 ORDER BY d.seq`,
	Blocks: `SELECT id, shard, seqs FROM ledger_blocks WHERE campaign = $1 ORDER BY id`,
	Terms:  `SELECT terms FROM ledger_packet_sets WHERE id = $1`,
	PendingRollUps: `SELECT id FROM ledger_campaigns
		WHERE NOT rolled_up AND refunded IS NOT NULL ORDER BY num LIMIT $1`,
	Totals: `SELECT coalesce(c.funding, ''), coalesce(c.total, 0), coalesce(k.count, 0),
			coalesce(k.cents, 0), c.refunded, coalesce(a.balance, 0), coalesce(s.count, 0), coalesce(s.cents, 0)
		FROM (SELECT $1::text AS id) q
		LEFT JOIN ledger_campaigns c ON c.id = q.id
		LEFT JOIN LATERAL (SELECT sum(count)::bigint AS count, sum(cents)::bigint AS cents
			FROM ledger_campaign_counts WHERE campaign = c.num) k ON true
		LEFT JOIN ledger_accounts a ON a.id = $2
		LEFT JOIN ledger_packet_sets s ON s.id = q.id`,
	// The few live campaigns are found by their partial index, and each
	// is probed by its (campaign, user_id) key.
	UserBalance: `SELECT (coalesce((SELECT balance FROM ledger_accounts WHERE id = $1), 0)
			+ coalesce((SELECT sum(g.cents) FROM ledger_campaigns c JOIN ledger_grants g
				ON g.campaign = c.num AND g.user_id = $2 WHERE NOT c.rolled_up), 0)
			+ coalesce((SELECT sum(d.cents) FROM ledger_campaigns c JOIN ledger_discounts d
				ON d.campaign = c.num AND d.user_id = $2 WHERE NOT c.rolled_up), 0))::bigint`,
	Balance: `SELECT balance FROM ledger_accounts WHERE id = $1`,
}
