// Package open opens a ledger from a DSN, choosing the backend by its
// form. It lives apart from package ledger because the backends import
// ledger for its types; ledger importing them back would be a cycle.
package open

import (
	"context"
	"fmt"
	"strings"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/postgres"
	"github.com/hongbao/hongbao/ledger/sqlite"
)

// Open opens the ledger at dsn and applies its pending migrations:
//
//	sqlite:PATH, file:PATH, or a path ending in .db   SQLite file (created if missing)
//	postgres://... or postgresql://...                PostgreSQL; add search_path=SCHEMA
//	                                                  to keep the ledger in its own schema
//
// It registers nothing globally.
func Open(ctx context.Context, dsn string) (ledger.Ledger, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		l, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return l, nil
	case strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"), strings.HasSuffix(dsn, ".db"):
		l, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	// The DSN is not echoed: it may hold a password.
	return nil, fmt.Errorf("%w: unrecognised ledger DSN (want sqlite:PATH, PATH.db or postgres://...)", ledger.ErrInvalid)
}
