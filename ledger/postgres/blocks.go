package postgres

import (
	"context"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// OpenBlock implements ledger.Ledger. The packet set is read first, in a
// statement of its own (a set never changes once committed); the insert
// then keeps the first writer's row, and a replay reads it back.
func (l *Ledger) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	var count int64
	row := l.pool.QueryRow(ctx, `SELECT count FROM ledger_packet_sets WHERE id = $1`, campaign)
	if err := query.PacketSet(row, campaign, &count); err != nil {
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
