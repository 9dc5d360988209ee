package sqlite

import (
	"context"
	"database/sql"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// WriteTerms implements ledger.Ledger: the check against the packet set
// and the update in one write transaction.
func (l *Ledger) WriteTerms(ctx context.Context, campaign string, t ledger.Terms) error {
	return wrap("write terms", l.tx(ctx, func(tx *sql.Tx) error {
		var count, cents int64
		row := tx.QueryRowContext(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = ?`, campaign)
		if err := query.PacketSet(row, campaign, &count, &cents); err != nil {
			return err
		}
		b, err := batch.CheckTerms(campaign, t, count, cents)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE ledger_packet_sets SET terms = ? WHERE id = ?`, string(b), campaign)
		return err
	}))
}
