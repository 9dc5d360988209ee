package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// RaiseLease implements ledger.Ledger: one conditional upsert, which
// waits for a concurrent raise of the same lease and then compares with
// what that one committed.
func (l *Ledger) RaiseLease(ctx context.Context, lease string, token int64) error {
	err := batch.RaiseLease(lease, token, func() (bool, error) {
		var got int64
		err := l.pool.QueryRow(ctx, `INSERT INTO ledger_leases AS l (name, token) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET token = excluded.token, raised_at = now() WHERE l.token < excluded.token
			RETURNING token`, lease, token).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}, func() (int64, error) { return l.LeaseToken(ctx, lease) })
	return wrap("raise lease", err)
}

// LeaseToken implements ledger.Ledger.
func (l *Ledger) LeaseToken(ctx context.Context, lease string) (int64, error) {
	var token int64
	err := l.pool.QueryRow(ctx, `SELECT token FROM ledger_leases WHERE name = $1`, lease).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return token, wrap("lease token", err)
}
