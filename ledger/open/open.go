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
// It is what the processes that write the ledger use (serve, settle):
// the first to start creates the ledger. It registers nothing globally.
func Open(ctx context.Context, dsn string) (ledger.Ledger, error) {
	return open(ctx, dsn, false)
}

// OpenExisting opens the ledger at dsn, of the forms Open takes, only if
// it exists at this build's schema version, and creates and migrates
// nothing: a missing SQLite file, a PostgreSQL schema that is missing or
// holds no ledger, or a ledger behind this build's migrations is
// ledger.ErrNotMigrated (the SQLite file and the schema are not created);
// a ledger ahead of them is ledger.ErrSchemaAhead. It is for the tools
// that read a ledger someone else writes (hongbao reconcile), so that a
// mistyped DSN fails instead of reading a new, empty ledger.
func OpenExisting(ctx context.Context, dsn string) (ledger.Ledger, error) {
	return open(ctx, dsn, true)
}

// Check reports whether dsn has a form Open takes (ledger.ErrInvalid if
// not), without opening anything: for a command that checks its flags
// before it starts.
func Check(dsn string) error {
	_, err := backend(dsn)
	return err
}

// The backends, by the form of their DSNs.
const (
	postgresDSN = "postgres"
	sqliteDSN   = "sqlite"
)

func backend(dsn string) (string, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return postgresDSN, nil
	case strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"), strings.HasSuffix(dsn, ".db"):
		return sqliteDSN, nil
	}
	// The DSN is not echoed: it may hold a password.
	return "", fmt.Errorf("%w: unrecognised ledger DSN (want sqlite:PATH, PATH.db or postgres://...)", ledger.ErrInvalid)
}

func open(ctx context.Context, dsn string, existing bool) (ledger.Ledger, error) {
	kind, err := backend(dsn)
	if err != nil {
		return nil, err
	}
	if kind == postgresDSN {
		var opts []postgres.Option
		if existing {
			opts = append(opts, postgres.Existing())
		}
		l, err := postgres.Open(ctx, dsn, opts...)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	var opts []sqlite.Option
	if existing {
		opts = append(opts, sqlite.Existing())
	}
	l, err := sqlite.Open(ctx, dsn, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}
