package query

import (
	"context"
	"database/sql"
	"errors"
)

// identityStmt reads the ledger's identity, the same in both dialects.
const identityStmt = `SELECT id FROM ledger_identity`

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
		return "", errors.New("ledger: identity: no row in ledger_identity")
	}
	if err != nil {
		return "", r.wrap("identity", err)
	}
	r.identity.Store(&id)
	return id, nil
}
