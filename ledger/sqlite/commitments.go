package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

var _ ledger.Committer = (*Ledger)(nil)

// WriteCommitment implements ledger.Committer: the checks and the writes in
// one write transaction.
func (l *Ledger) WriteCommitment(ctx context.Context, c ledger.Commitment, salts []byte) error {
	if err := batch.CheckCommitment(c, salts); err != nil {
		return err
	}
	return wrap("write commitment", l.tx(ctx, func(tx *sql.Tx) error {
		var count, cents int64
		row := tx.QueryRowContext(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = ?`, c.Campaign)
		if err := query.PacketSet(row, c.Campaign, &count, &cents); err != nil {
			return err
		}
		var stored []byte
		err := tx.QueryRowContext(ctx, `SELECT root FROM ledger_commitments WHERE id = ?`, c.Campaign).Scan(&stored)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if replay, err := batch.CommitmentAgrees(c, count, cents, stored); err != nil || replay {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_commitments (id, root, count, cents, body, holder_key) VALUES (?, ?, ?, ?, ?, ?)`,
			c.Campaign, c.Root[:], c.Count, c.Cents, string(c.Body), c.HolderKey); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO ledger_salts (campaign, chunk, salts) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		return batch.SaltChunks(salts, func(chunk int64, b []byte) error {
			_, err := stmt.ExecContext(ctx, c.Campaign, chunk, b)
			return err
		})
	}))
}

// Commitment implements ledger.Committer.
func (l *Ledger) Commitment(ctx context.Context, campaign string) (ledger.Commitment, error) {
	c := ledger.Commitment{Campaign: campaign}
	var root []byte
	var body string
	var purged sql.NullInt64
	err := l.db.QueryRowContext(ctx, `SELECT root, count, cents, body, holder_key, unixepoch(purged_at) FROM ledger_commitments WHERE id = ?`, campaign).
		Scan(&root, &c.Count, &c.Cents, &body, &c.HolderKey, &purged)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("%w: campaign %q", ledger.ErrNoCommitment, campaign)
	}
	if err != nil {
		return c, wrap("commitment", err)
	}
	copy(c.Root[:], root)
	c.Body = []byte(body)
	if purged.Valid {
		c.PurgedAt = time.Unix(purged.Int64, 0).UTC()
	}
	return c, nil
}

// Salts implements ledger.Committer.
func (l *Ledger) Salts(ctx context.Context, campaign string) ([]byte, error) {
	c, err := l.Commitment(ctx, campaign)
	if err != nil {
		return nil, err
	}
	if !c.PurgedAt.IsZero() {
		return nil, fmt.Errorf("%w: campaign %q, on %s", ledger.ErrDrawDataPurged, campaign, c.PurgedAt.Format(time.RFC3339))
	}
	rows, err := l.db.QueryContext(ctx, `SELECT salts FROM ledger_salts WHERE campaign = ? ORDER BY chunk`, campaign)
	if err != nil {
		return nil, wrap("salts", err)
	}
	defer rows.Close()
	out := make([]byte, 0, ledger.SaltSize*c.Count)
	var b []byte
	for rows.Next() {
		if err := rows.Scan(&b); err != nil {
			return nil, wrap("salts", err)
		}
		out = append(out, b...)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("salts", err)
	}
	if int64(len(out)) != ledger.SaltSize*c.Count {
		return nil, fmt.Errorf("ledger: salts of campaign %q: %d bytes stored for %d packets", campaign, len(out), c.Count)
	}
	return out, nil
}

// DrawRows implements ledger.Committer: packets and grants read in one
// statement, so in one snapshot.
func (l *Ledger) DrawRows(ctx context.Context, campaign string, fn func(ledger.DrawRow) error) error {
	var num int64
	if err := query.PacketSet(l.db.QueryRowContext(ctx, `SELECT num FROM ledger_packet_sets WHERE id = ?`, campaign), campaign, &num); err != nil {
		return wrap("draw rows", err)
	}
	rows, err := l.db.QueryContext(ctx, `SELECT p.seq, p.cents, g.user_id, g.granted_ms
		FROM ledger_packets p
		LEFT JOIN ledger_campaigns c ON c.id = ?
		LEFT JOIN ledger_grants g ON g.campaign = c.num AND g.seq = p.seq
		WHERE p.campaign = ? ORDER BY p.seq`, campaign, num)
	if err != nil {
		return wrap("draw rows", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ledger.DrawRow
		var user sql.NullString
		var at sql.NullInt64
		if err := rows.Scan(&r.Seq, &r.Cents, &user, &at); err != nil {
			return wrap("draw rows", err)
		}
		r.User = user.String
		if at.Valid {
			r.GrantedAt = time.UnixMilli(at.Int64).UTC()
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return wrap("draw rows", rows.Err())
}

// GrantTime implements ledger.Committer.
func (l *Ledger) GrantTime(ctx context.Context, campaign string, seq int64) (string, time.Time, error) {
	var user string
	var at sql.NullInt64
	err := l.db.QueryRowContext(ctx, `SELECT g.user_id, g.granted_ms FROM ledger_campaigns c
		JOIN ledger_grants g ON g.campaign = c.num AND g.seq = ?2 WHERE c.id = ?1`, campaign, seq).Scan(&user, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, fmt.Errorf("%w: campaign %q, packet %d", ledger.ErrNoGrant, campaign, seq)
	}
	if err != nil {
		return "", time.Time{}, wrap("grant time", err)
	}
	if !at.Valid {
		return user, time.Time{}, nil
	}
	return user, time.UnixMilli(at.Int64).UTC(), nil
}

// PurgeDrawData implements ledger.Committer: the campaigns are listed by
// their refund's time, and each is purged in a write transaction of its
// own that checks again that it is not purged yet.
func (l *Ledger) PurgeDrawData(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: purge limit %d", ledger.ErrInvalid, limit)
	}
	// created_at is UTC text to the second (CURRENT_TIMESTAMP).
	rows, err := l.db.QueryContext(ctx, `SELECT c.id FROM ledger_commitments c
		JOIN ledger_entries e ON e.campaign = c.id AND e.kind = 'refund'
		WHERE c.purged_at IS NULL AND unixepoch(e.created_at) < ?
		ORDER BY e.created_at, c.id LIMIT ?`, before.Unix(), limit)
	if err != nil {
		return nil, wrap("purge draw data", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, wrap("purge draw data", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, wrap("purge draw data", err)
	}
	var done []string
	for _, id := range ids {
		var purged bool
		err := l.tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE ledger_commitments SET holder_key = NULL, purged_at = CURRENT_TIMESTAMP
				WHERE id = ? AND purged_at IS NULL`, id)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			purged = true
			_, err = tx.ExecContext(ctx, `DELETE FROM ledger_salts WHERE campaign = ?`, id)
			return err
		})
		if err != nil {
			return done, wrap("purge draw data", err)
		}
		if purged {
			done = append(done, id)
		}
	}
	return done, nil
}
