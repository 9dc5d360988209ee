package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// packetsPerInsert is the number of packets one prepared INSERT writes:
// 2 variables a packet (the campaign key is a literal) stays far below
// SQLite's limit of 32766, and larger statements measured no faster.
const packetsPerInsert = 1000

// WritePackets implements ledger.Ledger. The write lock is held from
// BEGIN, so the comparison with a stored set and with the fund entry and
// the insert are one atomic step. The packets go in by one prepared
// multi-row INSERT, executed for every full chunk, in seq order, which
// appends to the end of the primary key's b-tree.
func (l *Ledger) WritePackets(ctx context.Context, campaign string, cents []int64) error {
	set, err := batch.CheckPackets(campaign, cents)
	if err != nil {
		return err
	}
	return wrap("write packets", l.tx(ctx, func(tx *sql.Tx) error {
		var have batch.PacketSet
		err := tx.QueryRowContext(ctx, `SELECT count, cents, digest FROM ledger_packet_sets WHERE id = ?`, campaign).
			Scan(&have.Count, &have.Cents, &have.Digest)
		switch {
		case err == nil && have.Same(set):
			return nil
		case err == nil:
			return batch.PacketsConflict(campaign, have, set)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var total int64
		err = tx.QueryRowContext(ctx, `SELECT total FROM ledger_campaigns WHERE id = ?`, campaign).Scan(&total)
		switch {
		case err == nil && total != set.Cents:
			return batch.PacketsFundConflict(campaign, total, set)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var num int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO ledger_packet_sets (id, count, cents, digest) VALUES (?, ?, ?, ?)
			RETURNING num`, campaign, set.Count, set.Cents, set.Digest).Scan(&num); err != nil {
			return err
		}
		return insertPackets(ctx, tx, num, cents)
	}))
}

// insertPackets writes packets seq 1..len(cents) of the packet set num.
func insertPackets(ctx context.Context, tx *sql.Tx, num int64, cents []int64) error {
	full := len(cents) / packetsPerInsert * packetsPerInsert
	args := make([]any, 0, 2*packetsPerInsert)
	if full > 0 {
		stmt, err := tx.PrepareContext(ctx, packetInsert(num, packetsPerInsert))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for start := 0; start < full; start += packetsPerInsert {
			args = appendPackets(args[:0], cents, start, start+packetsPerInsert)
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return err
			}
		}
	}
	if full == len(cents) {
		return nil
	}
	args = appendPackets(args[:0], cents, full, len(cents))
	_, err := tx.ExecContext(ctx, packetInsert(num, len(cents)-full), args...)
	return err
}

// packetInsert is an INSERT of n packets of the set num. num is an
// integer the database chose, so it goes in as a literal: one variable
// fewer to bind per packet. Anonymous parameters only, as in insertChunk.
func packetInsert(num int64, n int) string {
	row := "(" + strconv.FormatInt(num, 10) + ",?,?)"
	var q strings.Builder
	q.Grow(48 + n*(len(row)+1))
	q.WriteString(`INSERT INTO ledger_packets (campaign, seq, cents) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(row)
	}
	return q.String()
}

// appendPackets appends seq and cents of packets from..to-1 (0-based
// indexes into cents, so seq is index+1).
func appendPackets(args []any, cents []int64, from, to int) []any {
	for i := from; i < to; i++ {
		args = append(args, int64(i+1), cents[i])
	}
	return args
}

// packetSetNum returns the short key of the campaign's packets, or
// ErrNoPackets.
func (l *Ledger) packetSetNum(ctx context.Context, campaign string) (int64, error) {
	var num int64
	err := l.db.QueryRowContext(ctx, `SELECT num FROM ledger_packet_sets WHERE id = ?`, campaign).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	return num, err
}

// Packets implements ledger.Ledger.
func (l *Ledger) Packets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return l.streamPackets(ctx, "packets", campaign, fn,
		`SELECT seq, cents FROM ledger_packets WHERE campaign = ? ORDER BY seq`)
}

// UngrantedPackets implements ledger.Ledger. The campaign's grant key is
// looked up inside the statement, so packets and grants come from one
// snapshot; SQLite walks the packets in key order and probes the grants'
// primary key for each.
func (l *Ledger) UngrantedPackets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return l.streamPackets(ctx, "ungranted packets", campaign, fn, `SELECT p.seq, p.cents FROM ledger_packets p
		WHERE p.campaign = ? AND NOT EXISTS (
			SELECT 1 FROM ledger_grants g
			WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = ?) AND g.seq = p.seq)
		ORDER BY p.seq`, campaign)
}

// streamPackets runs query with the campaign's packet key and args and
// calls fn for each (seq, cents) row. The packet set is looked up first,
// in a statement of its own; that is safe because a set never changes
// once committed.
func (l *Ledger) streamPackets(ctx context.Context, op, campaign string, fn func(ledger.Packet) error, query string, args ...any) error {
	num, err := l.packetSetNum(ctx, campaign)
	if err != nil {
		return wrap(op, err)
	}
	rows, err := l.db.QueryContext(ctx, query, append([]any{num}, args...)...)
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
	rows, err := l.db.QueryContext(ctx, `SELECT g.seq, g.user_id, g.cents, coalesce(p.cents, 0)
		FROM ledger_grants g LEFT JOIN ledger_packets p ON p.campaign = ?1 AND p.seq = g.seq
		WHERE g.campaign = (SELECT num FROM ledger_campaigns WHERE id = ?2) AND p.cents IS NOT g.cents
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
