package postgres

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hongbao/hongbao/ledger"
)

// copyGrantsSQL is the COPY of copyText: PostgreSQL's text format, which
// the client writes with a few appends per grant, where pgx's binary COPY
// goes through a type-map lookup and an encode plan for every value.
const copyGrantsSQL = `COPY ledger_grants (campaign, seq, user_id, cents, granted_ms) FROM STDIN`

// copyBufs keeps the text of a batch between batches: a batch of 2,000
// grants is about 60 KB.
var copyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// copyText copies grants gs of campaign num into ledger_grants over conn,
// in COPY's text format: one line a grant, tab-separated, the user id
// escaped as the format requires.
//
// The text goes back to copyBufs only if the connection is still open.
// When the server ends the connection during the COPY (a restart, a
// terminated backend), pgx returns without waiting for the goroutine
// that reads the text, which may read it once more: handed to the next
// batch, that read would race with its writer and could consume the next
// batch's text, which would then copy fewer grants than it holds.
func copyText(ctx context.Context, conn *pgconn.PgConn, num int64, gs []ledger.Grant) (int64, error) {
	buf := copyBufs.Get().(*bytes.Buffer)
	defer func() {
		if !conn.IsClosed() {
			copyBufs.Put(buf)
		}
	}()
	buf.Reset()
	var n [20]byte
	campaign := strconv.AppendInt(n[:0], num, 10)
	campaign = append(campaign, '\t')
	line := make([]byte, 0, 64)
	for _, g := range gs {
		line = append(line[:0], campaign...)
		line = strconv.AppendInt(line, g.Seq, 10)
		line = append(line, '\t')
		line = appendCopyText(line, g.User)
		line = append(line, '\t')
		line = strconv.AppendInt(line, g.Cents, 10)
		line = append(line, '\t')
		if g.GrantedAt > 0 {
			line = strconv.AppendInt(line, g.GrantedAt, 10)
		} else {
			line = append(line, '\\', 'N') // NULL: the time is not known
		}
		line = append(line, '\n')
		buf.Write(line)
	}
	tag, err := conn.CopyFrom(ctx, buf, copyGrantsSQL)
	return tag.RowsAffected(), err
}

// appendCopyText appends s to b as a column of COPY's text format: a
// backslash, and the characters that end a column or a row, are escaped.
func appendCopyText(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\\\t\n\r") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, c)
		}
	}
	return b
}
