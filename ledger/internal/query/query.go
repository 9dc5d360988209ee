// Package query holds the Go that both ledger backends run around their
// SQL: walking result rows, scanning them into the ledger's types, naming
// errors, and the reads of ledger.Ledger (Reads), written once over a
// small interface that pgx and database/sql both fit. The SQL itself,
// each backend's dialect, and everything that decides locking and
// transactions stay in the backends.
package query

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// Rows is a result set: pgx.Rows and database/sql's *sql.Rows both are.
// Their Close differs (pgx's returns nothing); closeRows calls either.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// closeRows closes rows. The error of *sql.Rows' Close is dropped, as a
// deferred Close dropped it: a failed read reports its error from Err.
func closeRows(rows Rows) {
	switch r := rows.(type) {
	case interface{ Close() }:
		r.Close()
	case interface{ Close() error }:
		_ = r.Close()
	}
}

// Row is a single-row result: pgx.Row and *sql.Row. A missing row is an
// error for which errors.Is(err, sql.ErrNoRows) holds, for both drivers
// (pgx.ErrNoRows wraps sql.ErrNoRows).
type Row interface {
	Scan(dest ...any) error
}

// Scanner reads the current row into a T. Each call of a scanner's maker
// gives one with variables of its own, reused for every row, so a row
// costs no allocation beyond its values.
type Scanner[T any] func(Rows) (T, error)

// Each calls fn with every row of rows, read by scan, and closes rows. A
// database error (a scan's, the rows') goes through dbErr; fn's own error
// stops the walk and is returned as it is.
func Each[T any](rows Rows, scan Scanner[T], fn func(T) error, dbErr func(error) error) error {
	defer closeRows(rows)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return dbErr(err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return dbErr(rows.Err())
}

// Append appends every row of rows, read by scan, to into, and closes
// rows.
func Append[T any](rows Rows, scan Scanner[T], into []T) ([]T, error) {
	err := Each(rows, scan, func(v T) error {
		into = append(into, v)
		return nil
	}, func(err error) error { return err })
	return into, err
}

// GrantRows scans (seq, user_id, cents).
func GrantRows() Scanner[batch.Row] {
	var r batch.Row
	dest := []any{&r.Seq, &r.User, &r.Cents}
	return func(rows Rows) (batch.Row, error) {
		err := rows.Scan(dest...)
		return r, err
	}
}

// DiscountRows scans (user_id, order_id, seq, cents).
func DiscountRows() Scanner[batch.DiscountRow] {
	var r batch.DiscountRow
	dest := []any{&r.User, &r.Order, &r.Seq, &r.Cents}
	return func(rows Rows) (batch.DiscountRow, error) {
		err := rows.Scan(dest...)
		return r, err
	}
}

// PacketSet scans the campaign's row of ledger_packet_sets into dest; no
// row is ErrNoPackets.
func PacketSet(row Row, campaign string, dest ...any) error {
	err := row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: campaign %q", ledger.ErrNoPackets, campaign)
	}
	return err
}

// Wrap names the operation on a database error and leaves the ledger's
// own errors as they are. A violation of the escrow guard
// (batch.EscrowNotNegative, which escrowGuard recognises in the
// backend's errors) is a refusal, as the ledger's own check is.
func Wrap(op string, err error, escrowGuard func(error) bool) error {
	if err == nil || errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrNotFunded) ||
		errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrNoPackets) || errors.Is(err, ledger.ErrNoTerms) ||
		errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrFenced) || errors.Is(err, ledger.ErrForeign) ||
		errors.Is(err, ledger.ErrNotMigrated) || errors.Is(err, ledger.ErrStaleLease) || errors.Is(err, ledger.ErrNoCommitment) {
		return err
	}
	if escrowGuard(err) {
		return fmt.Errorf("ledger: %s: %w: escrow below zero (%v)", op, ledger.ErrRefused, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}
