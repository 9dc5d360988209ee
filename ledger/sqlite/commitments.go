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
	err := l.db.QueryRowContext(ctx, `SELECT root, count, cents, body, holder_key FROM ledger_commitments WHERE id = ?`, campaign).
		Scan(&root, &c.Count, &c.Cents, &body, &c.HolderKey)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("%w: campaign %q", ledger.ErrNoCommitment, campaign)
	}
	if err != nil {
		return c, wrap("commitment", err)
	}
	copy(c.Root[:], root)
	c.Body = []byte(body)
	return c, nil
}

// Salts implements ledger.Committer.
func (l *Ledger) Salts(ctx context.Context, campaign string) ([]byte, error) {
	c, err := l.Commitment(ctx, campaign)
	if err != nil {
		return nil, err
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
	rows, err := l.db.QueryContext(ctx, `SELECT p.seq, p.cents, g.user_id, unixepoch(g.created_at)
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
			r.SettledAt = time.Unix(at.Int64, 0).UTC()
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return wrap("draw rows", rows.Err())
}
