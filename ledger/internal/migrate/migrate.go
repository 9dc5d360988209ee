// Package migrate reads numbered schema migrations from an embedded
// directory. Applying them is the backend's job, because each database
// serialises concurrent starts its own way (an advisory lock in
// PostgreSQL, a BEGIN IMMEDIATE transaction in SQLite).
package migrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/ledger"
)

// Migration is one schema step. Versions start at 1 and have no gaps, so a
// database at version n has applied exactly the first n files.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// Step, when set, runs in the migration's transaction after SQL and
	// before the version is recorded: what the SQL cannot do itself, such
	// as storing a value drawn in Go. A database at the version has
	// therefore run it, whatever stopped the migration before.
	Step Step
}

// Exec runs one statement, with arguments, in a migration's transaction.
type Exec func(ctx context.Context, sql string, args ...any) error

// Step is the Go part of a migration (Migration.Step).
type Step func(ctx context.Context, exec Exec) error

// Load reads dir/NNNN_name.sql from fsys in version order and gives
// migration v the step steps[v]; a step for no migration is an error.
func Load(fsys fs.FS, dir string, steps map[int]Step) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("ledger: migration %q: name must be NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("ledger: read migration %q: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("ledger: migration %q: expected version %d", m.Name, i+1)
		}
	}
	for v, step := range steps {
		if v < 1 || v > len(ms) {
			return nil, fmt.Errorf("ledger: a migration step for version %d, which has no file", v)
		}
		ms[v-1].Step = step
	}
	return ms, nil
}

// IdentityVersion is the migration that creates ledger_identity, the
// one-row table of the ledger's identity (0009 in both backends). Its
// step is InsertIdentity.
const IdentityVersion = 9

// InsertIdentity is the step of migration IdentityVersion: it draws a new
// identity (NewIdentity) and stores it with insert, the backend's INSERT
// of one parameter into ledger_identity, which must do nothing when the
// row exists (ON CONFLICT DO NOTHING). It runs under the migration lock,
// in the transaction that records the version, so the ledger gets one
// identity, once, and keeps it; the insert's ON CONFLICT makes that hold
// even for two processes that got past the lock somehow.
func InsertIdentity(insert string) Step {
	return func(ctx context.Context, exec Exec) error {
		id, err := NewIdentity()
		if err != nil {
			return err
		}
		return exec(ctx, insert, id)
	}
}

// IdentityPrefix starts every ledger identity.
const IdentityPrefix = "ledger-"

// NewIdentity returns a new ledger identity: IdentityPrefix and 32
// lower-case hex digits of crypto/rand, 128 random bits, so two ledgers
// never draw the same.
func NewIdentity() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ledger: draw an identity: %w", err)
	}
	return IdentityPrefix + hex.EncodeToString(b[:]), nil
}

// hint is what an operator does about a ledger that is missing or
// behind: the tail of every ErrNotMigrated error.
const hint = "create or migrate it with 'hongbao migrate --ledger DSN' (serve and settle migrate it too when they start)"

// NotMigrated is an ErrNotMigrated error saying what is missing (what),
// and what to do about it.
func NotMigrated(what string) error {
	return fmt.Errorf("%w: %s; %s", ledger.ErrNotMigrated, what, hint)
}

// Check compares a database's schema version (have, 0 for none) with the
// migrations this build has (want): behind is ErrNotMigrated when
// existing is set (the caller must not migrate) and nil otherwise (the
// caller migrates); ahead is always ErrSchemaAhead, since a newer build
// may rely on what this one would not keep.
func Check(have, want int, existing bool) error {
	switch {
	case have > want:
		return fmt.Errorf("%w: the ledger is at schema version %d, this build knows %d; run a build that knows it",
			ledger.ErrSchemaAhead, have, want)
	case have < want && existing:
		if have == 0 {
			return NotMigrated("no ledger tables")
		}
		return NotMigrated(fmt.Sprintf("the ledger is at schema version %d, this build needs %d", have, want))
	}
	return nil
}
