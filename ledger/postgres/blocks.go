package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// OpenBlock implements ledger.Ledger. The packet set is read first, in a
// statement of its own (a set never changes once committed); the insert
// then keeps the first writer's row, and a replay reads it back.
func (l *Ledger) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	var count int64
	err := l.pool.QueryRow(ctx, `SELECT count FROM ledger_packet_sets WHERE id = $1`, campaign).Scan(&count)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	if err != nil {
		return wrap("open block", err)
	}
	seqs, err := batch.CheckBlock(campaign, b, count)
	if err != nil {
		return err
	}
	_, err = l.pool.Exec(ctx, `INSERT INTO ledger_blocks (campaign, id, shard, seqs, n) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (campaign, id) DO NOTHING`, campaign, b.ID, b.Shard, seqs, len(b.Seqs))
	if err != nil {
		return wrap("open block", err)
	}
	var stored string
	err = l.pool.QueryRow(ctx, `SELECT seqs FROM ledger_blocks WHERE campaign = $1 AND id = $2`, campaign, b.ID).Scan(&stored)
	if err != nil {
		return wrap("open block", err)
	}
	if stored != seqs {
		return batch.BlockConflict(campaign, b.ID, stored, seqs)
	}
	return nil
}

// Blocks implements ledger.Ledger.
func (l *Ledger) Blocks(ctx context.Context, campaign string, fn func(ledger.Block) error) error {
	rows, err := l.pool.Query(ctx, `SELECT id, shard, seqs FROM ledger_blocks WHERE campaign = $1 ORDER BY id`, campaign)
	if err != nil {
		return wrap("blocks", err)
	}
	var bs []ledger.Block
	for rows.Next() {
		var b ledger.Block
		var seqs string
		if err := rows.Scan(&b.ID, &b.Shard, &seqs); err != nil {
			rows.Close()
			return wrap("blocks", err)
		}
		if b.Seqs, err = batch.DecodeSeqs(seqs); err != nil {
			rows.Close()
			return err
		}
		bs = append(bs, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wrap("blocks", err)
	}
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}
