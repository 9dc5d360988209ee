package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// OpenBlock implements ledger.Ledger: the check against the packet set
// and the insert in one write transaction. A grab waits for it, so it is
// an urgent writer: it goes before the settlement batches queued in this
// process (it still waits for the one writing).
func (l *Ledger) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	return wrap("open block", l.txAs(ctx, true, func(tx *sql.Tx) error {
		var count int64
		err := tx.QueryRowContext(ctx, `SELECT count FROM ledger_packet_sets WHERE id = ?`, campaign).Scan(&count)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
		}
		if err != nil {
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

// Blocks implements ledger.Ledger.
func (l *Ledger) Blocks(ctx context.Context, campaign string, fn func(ledger.Block) error) error {
	rows, err := l.db.QueryContext(ctx, `SELECT id, shard, seqs FROM ledger_blocks WHERE campaign = ? ORDER BY id`, campaign)
	if err != nil {
		return wrap("blocks", err)
	}
	defer rows.Close()
	var bs []ledger.Block
	for rows.Next() {
		var b ledger.Block
		var seqs string
		if err := rows.Scan(&b.ID, &b.Shard, &seqs); err != nil {
			return wrap("blocks", err)
		}
		if b.Seqs, err = batch.DecodeSeqs(seqs); err != nil {
			return err
		}
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return wrap("blocks", err)
	}
	rows.Close()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}
