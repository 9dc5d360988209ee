package postgres

import (
	"context"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// WriteTerms implements ledger.Ledger. The packet set is read first, in a
// statement of its own: a set never changes once committed, so the check
// holds for the update that follows. Two writers of one campaign's terms
// leave the last one's.
func (l *Ledger) WriteTerms(ctx context.Context, campaign string, t ledger.Terms) error {
	var count, cents int64
	row := l.pool.QueryRow(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = $1`, campaign)
	if err := query.PacketSet(row, campaign, &count, &cents); err != nil {
		return wrap("write terms", err)
	}
	b, err := batch.CheckTerms(campaign, t, count, cents)
	if err != nil {
		return err
	}
	_, err = l.pool.Exec(ctx, `UPDATE ledger_packet_sets SET terms = $2 WHERE id = $1`, campaign, string(b))
	return wrap("write terms", err)
}
