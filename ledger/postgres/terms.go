package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// WriteTerms implements ledger.Ledger. The packet set is read first, in a
// statement of its own: a set never changes once committed, so the check
// holds for the update that follows. Two writers of one campaign's terms
// leave the last one's.
func (l *Ledger) WriteTerms(ctx context.Context, campaign string, t ledger.Terms) error {
	var count, cents int64
	err := l.pool.QueryRow(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = $1`, campaign).Scan(&count, &cents)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	if err != nil {
		return wrap("write terms", err)
	}
	b, err := batch.CheckTerms(campaign, t, count, cents)
	if err != nil {
		return err
	}
	_, err = l.pool.Exec(ctx, `UPDATE ledger_packet_sets SET terms = $2 WHERE id = $1`, campaign, string(b))
	return wrap("write terms", err)
}

// Terms implements ledger.Ledger.
func (l *Ledger) Terms(ctx context.Context, campaign string) (ledger.Terms, error) {
	var stored *string
	err := l.pool.QueryRow(ctx, `SELECT terms FROM ledger_packet_sets WHERE id = $1`, campaign).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Terms{}, fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	if err != nil {
		return ledger.Terms{}, wrap("terms", err)
	}
	return batch.DecodeTerms(campaign, stored)
}
