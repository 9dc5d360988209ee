package query

import (
	"context"
	"database/sql"
	"errors"

	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
)

// The statements of the ledger's identity and schema version read the
// same in both dialects.
const (
	identityStmt = `SELECT id FROM ledger_identity`
	versionStmt  = `SELECT coalesce(max(version), 0) FROM ledger_migrations`
)

// Identity implements ledger.Ledger. The first call that succeeds reads
// the row migration 0009 stored, and later calls answer what it read: the
// row never changes, so neither a round trip per write nor a stale value
// can come of the cache. Two first calls at once both read it, and agree.
func (r Reads) Identity(ctx context.Context) (string, error) {
	if id := r.identity.Load(); id != nil {
		return *id, nil
	}
	var id string
	err := r.queryRow(ctx, identityStmt).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		// Only a hand-edited database lacks the row: the migration that
		// made the table stored it in the same transaction.
		return "", r.wrap("identity", migrate.NotMigrated("the ledger has no identity row"))
	}
	if err != nil {
		return "", r.wrap("identity", err)
	}
	r.identity.Store(&id)
	return id, nil
}

// SchemaVersion returns the number of migrations the database has
// applied (ledger_migrations), what hongbao migrate reports.
func (r Reads) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := r.queryRow(ctx, versionStmt).Scan(&v)
	return v, r.wrap("schema version", err)
}

// Do runs a write of campaign named op (Fund, Refund; Apply for the
// batches) on either backend: first the owner rule (batch.Foreign,
// against the backend's Identity), then fn in one of the backend's
// transactions, its errors named by Wrap. A write refused as foreign
// never begins its transaction, so it writes nothing; the identity it is
// checked against never changes, so checking before the transaction
// leaves no window.
func (w Writes[Tx]) Do(ctx context.Context, op, campaign string, fn func(Tx) error) error {
	if err := batch.Foreign(ctx, campaign, w.Identity); err != nil {
		return w.Wrap(op, err)
	}
	return w.Wrap(op, w.Tx(ctx, fn))
}
