package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

const migrateUsage = `Usage: hongbao migrate --ledger DSN [--json]

Creates the ledger at DSN if it does not exist (a SQLite file; on PostgreSQL,
the schema its search_path names first, and the ledger's tables in it) and
applies the migrations of this build that it lacks, then prints the ledger's
identity and its schema version. Running it again changes nothing; processes
migrating one ledger at once take turns.

serve and settle migrate their ledger when they start too. reconcile does
not: it opens only a ledger that exists at this build's schema version, so
that a mistyped --ledger is an error, not a new, empty ledger that
reconciles. Run migrate before reconcile on a ledger nothing has written yet,
or after an upgrade of hongbao before any serve or settle has started.

The identity ("ledger-" and 32 hex digits) is drawn once, when the ledger
gets its schema version 9, and never changes: campaigns record the identity
of the ledger they settle into, and a ledger refuses the settlement of a
campaign recorded for another.

A ledger whose schema is newer than this build's is an error (exit 1): run
the newer build.

Flags:`

// migrateCmd is "hongbao migrate": create or migrate a ledger explicitly,
// for the commands that will not (reconcile).
type migrateCmd struct {
	base
	dsn    string
	asJSON bool
	led    ledger.Ledger
}

func newMigrateCmd(env *IO) command { return &migrateCmd{base: base{env: env}} }

func (c *migrateCmd) parseFlags(args []string) error {
	if _, err := c.parseCommand("migrate", migrateUsage, args, func(fs *flag.FlagSet) {
		fs.StringVar(&c.dsn, "ledger", "", "ledger to create or migrate: sqlite:PATH or postgres://... (required)")
		fs.BoolVar(&c.asJSON, "json", false, "print the identity and the schema version as JSON")
	}); err != nil {
		return err
	}
	if c.dsn == "" {
		return usageErrorf("--ledger is required (sqlite:PATH or postgres://...)")
	}
	if err := open.Check(c.dsn); err != nil {
		return usageErrorf("--ledger: %v", err)
	}
	return nil
}

func (c *migrateCmd) open(ctx context.Context) error {
	l, err := openLedger(ctx, c.dsn)
	if err != nil {
		return err
	}
	c.deferClose(func() { _ = l.Close() })
	c.led = l
	return nil
}

// versioned is a ledger that reports its schema version, as both
// backends' do.
type versioned interface {
	SchemaVersion(ctx context.Context) (int, error)
}

// migrateReport is what migrate prints.
type migrateReport struct {
	Identity      string `json:"identity"`
	SchemaVersion int    `json:"schema_version"`
}

func (c *migrateCmd) run(ctx context.Context) error {
	v, ok := c.led.(versioned)
	if !ok {
		return errors.New("this ledger does not report its schema version")
	}
	var rep migrateReport
	var err error
	if rep.SchemaVersion, err = v.SchemaVersion(ctx); err != nil {
		return err
	}
	if rep.Identity, err = c.led.Identity(ctx); err != nil {
		return err
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(rep)
	}
	fmt.Fprintf(c.env.Stdout, "Ledger ready at schema version %d\n  identity %s\n", rep.SchemaVersion, rep.Identity)
	return nil
}
