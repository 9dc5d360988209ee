package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// RaiseLease implements ledger.Ledger: the conditional upsert, and the
// read of the token that stopped it, in one write transaction.
func (l *Ledger) RaiseLease(ctx context.Context, lease string, token int64) error {
	if err := batch.CheckLease(lease, token); err != nil {
		return err
	}
	return wrap("raise lease", l.tx(ctx, func(tx *sql.Tx) error {
		return batch.RaiseLease(lease, token, func() (bool, error) {
			var got int64
			err := tx.QueryRowContext(ctx, `INSERT INTO ledger_leases AS l (name, token) VALUES (?, ?)
				ON CONFLICT (name) DO UPDATE SET token = excluded.token, raised_at = CURRENT_TIMESTAMP WHERE l.token < excluded.token
				RETURNING token`, lease, token).Scan(&got)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return err == nil, err
		}, func() (int64, error) {
			var rec int64
			err := tx.QueryRowContext(ctx, `SELECT token FROM ledger_leases WHERE name = ?`, lease).Scan(&rec)
			return rec, err
		})
	}))
}

// LeaseToken implements ledger.Ledger.
func (l *Ledger) LeaseToken(ctx context.Context, lease string) (int64, error) {
	var token int64
	err := l.db.QueryRowContext(ctx, `SELECT token FROM ledger_leases WHERE name = ?`, lease).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return token, wrap("lease token", err)
}
