package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

var _ ledger.Committer = (*Ledger)(nil)

// WriteCommitment implements ledger.Committer. The campaign's row is
// locked first (an insert of it, or the conflict it waits on), so two
// writers of one campaign compare in turn.
func (l *Ledger) WriteCommitment(ctx context.Context, c ledger.Commitment, salts []byte) error {
	if err := batch.CheckCommitment(c, salts); err != nil {
		return err
	}
	return wrap("write commitment", l.tx(ctx, func(tx pgx.Tx) error {
		var count, cents int64
		row := tx.QueryRow(ctx, `SELECT count, cents FROM ledger_packet_sets WHERE id = $1`, c.Campaign)
		if err := query.PacketSet(row, c.Campaign, &count, &cents); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO ledger_commitments (id, root, count, cents, body, holder_key)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
			c.Campaign, c.Root[:], c.Count, c.Cents, string(c.Body), c.HolderKey)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var stored []byte
			if err := tx.QueryRow(ctx, `SELECT root FROM ledger_commitments WHERE id = $1`, c.Campaign).Scan(&stored); err != nil {
				return err
			}
			_, err := batch.CommitmentAgrees(c, count, cents, stored)
			return err
		}
		if _, err := batch.CommitmentAgrees(c, count, cents, nil); err != nil {
			return err
		}
		var b pgx.Batch
		_ = batch.SaltChunks(salts, func(chunk int64, s []byte) error {
			b.Queue(`INSERT INTO ledger_salts (campaign, chunk, salts) VALUES ($1, $2, $3)`, c.Campaign, chunk, s)
			return nil
		})
		return tx.SendBatch(ctx, &b).Close()
	}))
}

// Commitment implements ledger.Committer.
func (l *Ledger) Commitment(ctx context.Context, campaign string) (ledger.Commitment, error) {
	c := ledger.Commitment{Campaign: campaign}
	var root []byte
	var body string
	var purged *time.Time
	err := l.pool.QueryRow(ctx, `SELECT root, count, cents, body, holder_key, purged_at FROM ledger_commitments WHERE id = $1`, campaign).
		Scan(&root, &c.Count, &c.Cents, &body, &c.HolderKey, &purged)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("%w: campaign %q", ledger.ErrNoCommitment, campaign)
	}
	if err != nil {
		return c, wrap("commitment", err)
	}
	copy(c.Root[:], root)
	c.Body = []byte(body)
	if purged != nil {
		c.PurgedAt = purged.UTC()
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
	rows, err := l.pool.Query(ctx, `SELECT salts FROM ledger_salts WHERE campaign = $1 ORDER BY chunk`, campaign)
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
	if err := query.PacketSet(l.pool.QueryRow(ctx, `SELECT num FROM ledger_packet_sets WHERE id = $1`, campaign), campaign, &num); err != nil {
		return wrap("draw rows", err)
	}
	rows, err := l.pool.Query(ctx, `SELECT p.seq, p.cents, g.user_id, g.granted_ms
		FROM ledger_packets p
		LEFT JOIN ledger_campaigns c ON c.id = $1
		LEFT JOIN ledger_grants g ON g.campaign = c.num AND g.seq = p.seq
		WHERE p.campaign = $2 ORDER BY p.seq`, campaign, num)
	if err != nil {
		return wrap("draw rows", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ledger.DrawRow
		var user *string
		var at *int64
		if err := rows.Scan(&r.Seq, &r.Cents, &user, &at); err != nil {
			return wrap("draw rows", err)
		}
		if user != nil {
			r.User = *user
		}
		if at != nil {
			r.GrantedAt = time.UnixMilli(*at).UTC()
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
	var at *int64
	err := l.pool.QueryRow(ctx, `SELECT g.user_id, g.granted_ms FROM ledger_campaigns c
		JOIN ledger_grants g ON g.campaign = c.num AND g.seq = $2 WHERE c.id = $1`, campaign, seq).Scan(&user, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, fmt.Errorf("%w: campaign %q, packet %d", ledger.ErrNoGrant, campaign, seq)
	}
	if err != nil {
		return "", time.Time{}, wrap("grant time", err)
	}
	if at == nil {
		return user, time.Time{}, nil
	}
	return user, time.UnixMilli(*at).UTC(), nil
}

// PurgeDrawData implements ledger.Committer: the campaigns are listed by
// their refund's time, and each is purged in a transaction of its own
// that checks again that it is not purged yet, so that two sweeps racing
// purge it once.
func (l *Ledger) PurgeDrawData(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: purge limit %d", ledger.ErrInvalid, limit)
	}
	rows, err := l.pool.Query(ctx, `SELECT c.id FROM ledger_commitments c
		JOIN ledger_entries e ON e.campaign = c.id AND e.kind = 'refund'
		WHERE c.purged_at IS NULL AND e.created_at < $1
		ORDER BY e.created_at, c.id LIMIT $2`, before, limit)
	if err != nil {
		return nil, wrap("purge draw data", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("purge draw data", err)
	}
	var done []string
	for _, id := range ids {
		var purged bool
		err := l.tx(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE ledger_commitments SET holder_key = NULL, purged_at = now()
				WHERE id = $1 AND purged_at IS NULL`, id)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			purged = true
			_, err = tx.Exec(ctx, `DELETE FROM ledger_salts WHERE campaign = $1`, id)
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
