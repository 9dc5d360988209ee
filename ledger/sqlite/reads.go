package sqlite

import (
	"context"
	"database/sql"

	"github.com/hongbao/hongbao/ledger/internal/query"
)

// reads are the reads of ledger.Ledger, written once for both backends
// (query.Reads), embedded in Ledger under a name of this package's own.
type reads = query.Reads

// snapshot runs a read of many rows (CheckBalances) in a read
// transaction: a plain (deferred) BEGIN, as the driver sends for a read-only
// one instead of the writers' BEGIN IMMEDIATE, outside the writers'
// gate. In WAL mode it reads the database as of its first statement and
// writers go on committing; while it runs, a checkpoint cannot copy the
// pages it may still read, so the WAL file grows.
func snapshot(db *sql.DB) query.Snapshot {
	return func(ctx context.Context, fn func(query.Query) error) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		return fn(query.QueryOf(tx.QueryContext))
	}
}

// statements are the reads' SQL.
var statements = query.Statements{
	PacketSetNum: `SELECT num FROM ledger_packet_sets WHERE id = ?`,
	Packets:      `SELECT seq, cents FROM ledger_packets WHERE campaign = ? ORDER BY seq`,
	// SQLite walks the packets in key order and probes the grants'
	// primary key for each.
	UngrantedPackets: `SELECT p.seq, p.cents FROM ledger_packets p
		WHERE p.campaign = ? AND NOT EXISTS (
			SELECT 1 FROM ledger_grants g
			WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = ?) AND g.seq = p.seq)
		ORDER BY p.seq`,
	MismatchedGrants: `SELECT g.seq, g.user_id, g.cents, coalesce(p.cents, 0)
		FROM ledger_grants g LEFT JOIN ledger_packets p ON p.campaign = ?1 AND p.seq = g.seq
		WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = ?2) AND p.cents IS NOT g.cents
		ORDER BY g.seq`,
	Grants: `SELECT g.seq, g.user_id, g.cents
		FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
		WHERE c.id = ? ORDER BY g.seq`,
	Discounts: `SELECT d.user_id, d.order_id, d.seq, d.cents
		FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
		WHERE c.id = ? ORDER BY d.seq`,
	Blocks: `SELECT id, shard, seqs FROM ledger_blocks WHERE campaign = ? ORDER BY id`,
	Terms:  `SELECT terms FROM ledger_packet_sets WHERE id = ?`,
	PendingRollUps: `SELECT id FROM ledger_campaigns
		WHERE rolled_up = 0 AND refunded IS NOT NULL ORDER BY num LIMIT ?`,
	Totals: `SELECT coalesce(c.funding, ''), coalesce(c.total, 0),
			coalesce((SELECT sum(count) FROM ledger_campaign_counts WHERE campaign = c.num), 0),
			coalesce((SELECT sum(cents) FROM ledger_campaign_counts WHERE campaign = c.num), 0),
			c.refunded, coalesce(a.balance, 0), coalesce(s.count, 0), coalesce(s.cents, 0)
		FROM (SELECT ?1 AS id) k
		LEFT JOIN ledger_campaigns c ON c.id = k.id
		LEFT JOIN ledger_accounts a ON a.id = ?2
		LEFT JOIN ledger_packet_sets s ON s.id = k.id`,
	// CROSS JOIN keeps SQLite looping over the few live campaigns (their
	// partial index) and probing each by its (campaign, user_id) key.
	UserBalance: `SELECT coalesce((SELECT balance FROM ledger_accounts WHERE id = ?1), 0)
			+ coalesce((SELECT sum(g.cents) FROM ledger_campaigns c CROSS JOIN ledger_grants g
				WHERE c.rolled_up = 0 AND g.campaign = c.num AND g.user_id = ?2), 0)
			+ coalesce((SELECT sum(d.cents) FROM ledger_campaigns c CROSS JOIN ledger_discounts d
				WHERE c.rolled_up = 0 AND d.campaign = c.num AND d.user_id = ?2), 0)`,
	Balance: `SELECT balance FROM ledger_accounts WHERE id = ?`,
}
