package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// OpenBlock implements ledger.Ledger: the check against the packet set
// and the insert in one write transaction. A grab waits for it, so it is
// an urgent writer: it goes before the settlement batches queued in this
// process (it still waits for the one writing).
func (l *Ledger) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	return wrap("open block", l.txAs(ctx, true, func(tx *sql.Tx) error {
		var count int64
		row := tx.QueryRowContext(ctx, `SELECT count FROM ledger_packet_sets WHERE id = ?`, campaign)
		if err := query.PacketSet(row, campaign, &count); err != nil {
			return err
		}
		seqs, err := batch.CheckBlock(campaign, b, count)
		if err != nil {
			return err
		}
		var stored string
		err = tx.QueryRowContext(ctx, `SELECT seqs FROM ledger_blocks WHERE campaign = ? AND id = ?`, campaign, b.ID).Scan(&stored)
		switch {
		case err == nil && stored == seqs:
			return nil
		case err == nil:
			return batch.BlockConflict(campaign, b.ID, stored, seqs)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO ledger_blocks (campaign, id, shard, seqs, n) VALUES (?, ?, ?, ?, ?)`,
			campaign, b.ID, b.Shard, seqs, len(b.Seqs))
		return err
	}))
}
