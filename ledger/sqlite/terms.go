package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// WriteTerms implements ledger.Ledger: the check against the packet set
// and the update in one write transaction.
func (l *Ledger) WriteTerms(ctx context.Context, campaign string, t ledger.Terms) error {
	return wrap("write terms", l.tx(ctx, func(tx *sql.Tx) error {
		var count, cents int64
		err := tx.QueryRowContext(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = ?`, campaign).Scan(&count, &cents)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
		}
		if err != nil {
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

// Terms implements ledger.Ledger.
func (l *Ledger) Terms(ctx context.Context, campaign string) (ledger.Terms, error) {
	var stored *string
	err := l.db.QueryRowContext(ctx, `SELECT terms FROM ledger_packet_sets WHERE id = ?`, campaign).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Terms{}, fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	if err != nil {
		return ledger.Terms{}, wrap("terms", err)
	}
	return batch.DecodeTerms(campaign, stored)
}
