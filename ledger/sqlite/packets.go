package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// packetsPerInsert is the number of packets one prepared INSERT writes:
// 2 variables a packet (the campaign key is a literal) stays far below
// SQLite's limit of 32766, and larger statements measured no faster.
const packetsPerInsert = 1000

// packetSetStatements are WritePackets' reads of the rows it checks and
// its insert of the new set's row.
var packetSetStatements = query.PacketSetStatements{
	Stored:    `SELECT count, cents, digest FROM ledger_packet_sets WHERE id = ?`,
	FundTotal: `SELECT total FROM ledger_campaigns WHERE id = ?`,
	Insert: `INSERT INTO ledger_packet_sets (id, count, cents, digest) VALUES (?, ?, ?, ?)
			RETURNING num`,
}

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
		num, replay, err := query.WritePacketSet(campaign, set, query.RowOf(ctx, tx.QueryRowContext), packetSetStatements)
		if err != nil || replay {
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
