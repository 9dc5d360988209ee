package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// campaignLockClass is the first key of the per-campaign advisory lock
// ("hbCp") that Fund and WritePackets take: each checks the other's row
// (total against packets), and under READ COMMITTED two transactions that
// each insert one row and check for the other could both pass. The second
// key hashes the schema with the campaign id; a collision only makes two
// campaigns' creates wait for each other.
const campaignLockClass = 0x68624370

func lockCampaign(ctx context.Context, tx pgx.Tx, campaign string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '') || '/' || $2))`,
		campaignLockClass, campaign)
	return err
}

// WritePackets implements ledger.Ledger. Under the campaign's advisory
// lock it compares with a stored set (replay or conflict) and with the
// fund entry; a new set gets its ledger_packet_sets row and then its
// packets by COPY, straight into ledger_packets: the new row's num is
// fresh, so no stored packet can collide and no staging table is needed.
func (l *Ledger) WritePackets(ctx context.Context, campaign string, cents []int64) error {
	set, err := batch.CheckPackets(campaign, cents)
	if err != nil {
		return err
	}
	return wrap("write packets", l.tx(ctx, func(tx pgx.Tx) error {
		if err := lockCampaign(ctx, tx, campaign); err != nil {
			return err
		}
		var have batch.PacketSet
		err := tx.QueryRow(ctx, `SELECT count, cents, digest FROM ledger_packet_sets WHERE id = $1`, campaign).
			Scan(&have.Count, &have.Cents, &have.Digest)
		switch {
		case err == nil && have.Same(set):
			return nil
		case err == nil:
			return batch.PacketsConflict(campaign, have, set)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var total int64
		err = tx.QueryRow(ctx, `SELECT total FROM ledger_campaigns WHERE id = $1`, campaign).Scan(&total)
		switch {
		case err == nil && total != set.Cents:
			return batch.PacketsFundConflict(campaign, total, set)
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var num int64
		if err := tx.QueryRow(ctx, `INSERT INTO ledger_packet_sets (id, count, cents, digest) VALUES ($1, $2, $3, $4)
			RETURNING num`, campaign, set.Count, set.Cents, set.Digest).Scan(&num); err != nil {
			return err
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_packets"}, []string{"campaign", "seq", "cents"},
			&packetSource{num: num, cents: cents, i: -1})
		if err == nil && n != set.Count {
			err = fmt.Errorf("copied %d packets of %d", n, set.Count)
		}
		return err
	}))
}

// packetSource feeds COPY one packet at a time from the caller's slice,
// reusing one row, so the copy needs no memory per packet.
type packetSource struct {
	num   int64
	cents []int64
	i     int
	row   [3]any
}

func (s *packetSource) Next() bool { s.i++; return s.i < len(s.cents) }

func (s *packetSource) Values() ([]any, error) {
	s.row[0], s.row[1], s.row[2] = s.num, int64(s.i+1), s.cents[s.i]
	return s.row[:], nil
}

func (s *packetSource) Err() error { return nil }

// packetSetNum returns the short key of the campaign's packets, or
// ErrNoPackets.
func (l *Ledger) packetSetNum(ctx context.Context, campaign string) (int64, error) {
	var num int64
	err := l.pool.QueryRow(ctx, `SELECT num FROM ledger_packet_sets WHERE id = $1`, campaign).Scan(&num)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	return num, err
}

// Packets implements ledger.Ledger.
func (l *Ledger) Packets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return l.streamPackets(ctx, "packets", campaign, fn,
		`SELECT seq, cents FROM ledger_packets WHERE campaign = $1 ORDER BY seq`)
}

// UngrantedPackets implements ledger.Ledger. The campaign's grant key is
// looked up inside the statement, so packets and grants come from one
// snapshot even when the fund entry is written meanwhile; both primary
// keys are in seq order, and PostgreSQL merges them.
func (l *Ledger) UngrantedPackets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return l.streamPackets(ctx, "ungranted packets", campaign, fn, `SELECT p.seq, p.cents FROM ledger_packets p
		WHERE p.campaign = $1 AND NOT EXISTS (
			SELECT 1 FROM ledger_grants g
			WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = $2) AND g.seq = p.seq)
		ORDER BY p.seq`, campaign)
}

// streamPackets runs query with the campaign's packet key ($1) and args
// ($2...) and calls fn for each (seq, cents) row. The packet set is looked
// up first, in a statement of its own; that is safe because a set never
// changes once committed.
func (l *Ledger) streamPackets(ctx context.Context, op, campaign string, fn func(ledger.Packet) error, query string, args ...any) error {
	num, err := l.packetSetNum(ctx, campaign)
	if err != nil {
		return wrap(op, err)
	}
	rows, err := l.pool.Query(ctx, query, append([]any{num}, args...)...)
	if err != nil {
		return wrap(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p ledger.Packet
		if err := rows.Scan(&p.Seq, &p.Cents); err != nil {
			return wrap(op, err)
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return wrap(op, rows.Err())
}

// MismatchedGrants implements ledger.Ledger.
func (l *Ledger) MismatchedGrants(ctx context.Context, campaign string, fn func(ledger.Mismatch) error) error {
	num, err := l.packetSetNum(ctx, campaign)
	if err != nil {
		return wrap("mismatched grants", err)
	}
	rows, err := l.pool.Query(ctx, `SELECT g.seq, g.user_id, g.cents, coalesce(p.cents, 0)
		FROM ledger_grants g LEFT JOIN ledger_packets p ON p.campaign = $1 AND p.seq = g.seq
		WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = $2) AND p.cents IS DISTINCT FROM g.cents
		ORDER BY g.seq`, num, campaign)
	if err != nil {
		return wrap("mismatched grants", err)
	}
	defer rows.Close()
	for rows.Next() {
		m := ledger.Mismatch{Grant: ledger.Grant{Campaign: campaign}}
		if err := rows.Scan(&m.Grant.Seq, &m.Grant.User, &m.Grant.Cents, &m.Packet.Cents); err != nil {
			return wrap("mismatched grants", err)
		}
		m.Packet.Seq = m.Grant.Seq
		if err := fn(m); err != nil {
			return err
		}
	}
	return wrap("mismatched grants", rows.Err())
}
