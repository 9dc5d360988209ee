package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// The checks below compare a write with a row stored for its campaign,
// read in the backend's transaction, each by its own statement: they
// decide alike on both backends, while when and under which lock the row
// is read stays the backend's.

// SameFund compares the fund entry stored for c (row: funding, total)
// with c: nil for a replay, a *ConflictError for another entry, and the
// row's error (sql.ErrNoRows when there is none) otherwise.
func SameFund(c ledger.Campaign, row Row) error {
	var have ledger.Campaign
	if err := row.Scan(&have.Funding, &have.Total); err != nil {
		return err
	}
	if have.Funding == c.Funding && have.Total == c.Total {
		return nil
	}
	return &ledger.ConflictError{Entry: "fund", Campaign: c.ID,
		Existing: fmt.Sprintf("funding %q total %d", have.Funding, have.Total),
		Attempt:  fmt.Sprintf("funding %q total %d", c.Funding, c.Total)}
}

// FundMatchesPackets checks a new fund entry c against the campaign's
// packets (row: the packet set's cents), when they are recorded.
func FundMatchesPackets(c ledger.Campaign, row Row) error {
	var packetCents int64
	err := row.Scan(&packetCents)
	switch {
	case err == nil && packetCents != c.Total:
		return batch.FundPacketsConflict(c, packetCents)
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

// PacketSetStatements are a backend's SQL for WritePacketSet: the
// stored set (campaign id -> count, cents, digest), the fund entry's
// total (campaign id -> total), and the insert of the new set (campaign
// id, count, cents, digest -> its num).
type PacketSetStatements struct {
	Stored, FundTotal, Insert string
}

// WritePacketSet writes the row of a new packet set of the campaign and
// returns its num, after comparing set with the stored one (replay true
// for the same set, a *ConflictError for another) and with the fund
// entry's total, when there is one. Each is a statement of its own, run
// by row in the backend's transaction, in that order.
func WritePacketSet(campaign string, set batch.PacketSet, row func(sql string, args ...any) Row, stmt PacketSetStatements) (num int64, replay bool, err error) {
	var have batch.PacketSet
	err = row(stmt.Stored, campaign).Scan(&have.Count, &have.Cents, &have.Digest)
	switch {
	case err == nil && have.Same(set):
		return 0, true, nil
	case err == nil:
		return 0, false, batch.PacketsConflict(campaign, have, set)
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, err
	}
	var total int64
	err = row(stmt.FundTotal, campaign).Scan(&total)
	switch {
	case err == nil && total != set.Cents:
		return 0, false, batch.PacketsFundConflict(campaign, total, set)
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return 0, false, err
	}
	err = row(stmt.Insert, campaign, set.Count, set.Cents, set.Digest).Scan(&num)
	return num, false, err
}

// RowOf binds a backend's QueryRow (a pool's or a transaction's) to ctx.
func RowOf[W Row](ctx context.Context, queryRow func(ctx context.Context, sql string, args ...any) W) func(sql string, args ...any) Row {
	return func(sql string, args ...any) Row { return queryRow(ctx, sql, args...) }
}

// Funded is err, or ErrNotFunded when err says the campaign has no row
// (sql.ErrNoRows).
func Funded(campaign string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
	}
	return err
}

// Refunded decides a refund of cents from the campaign's row as the
// backend read it, under its lock: read is the read's error (no row is
// ErrNotFunded), fence the campaign's (a refund prepared under an older
// one is ErrFenced), refunded the refund recorded (nil for none). done
// is a replay of the same amount; another amount is a *ConflictError.
func Refunded(ctx context.Context, campaign string, cents int64, read error, fence int64, refunded *int64) (done bool, err error) {
	if read != nil {
		return false, Funded(campaign, read)
	}
	if err := batch.Fenced(ctx, "refund", campaign, fence); err != nil {
		return false, err
	}
	switch {
	case refunded == nil:
		return false, nil
	case *refunded == cents:
		return true, nil
	}
	return false, &ledger.ConflictError{Entry: "refund", Campaign: campaign,
		Existing: fmt.Sprintf("%d cents", *refunded), Attempt: fmt.Sprintf("%d cents", cents)}
}
