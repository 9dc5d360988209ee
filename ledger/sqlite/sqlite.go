// Package sqlite is the embedded ledger: one SQLite file (modernc.org/sqlite,
// no cgo), for a single host and for demos.
//
// The connection settings are the ones a settlement needs. WAL lets
// readers (Totals, Grants, Packets, Balance) run while a batch is written.
// synchronous=FULL makes a commit durable before it returns, because the
// worker acknowledges the grants to Redis right after the commit and a
// grant acknowledged but lost would be money nobody can account for.
// Write transactions start with BEGIN IMMEDIATE (the driver's _txlock
// parameter), so a writer takes the write lock when it begins instead of
// failing with SQLITE_BUSY halfway when it upgrades from a read; the busy
// timeout makes a second process wait for the lock rather than fail.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

//go:embed migrations/*.sql
var migrations embed.FS

// params are appended to every DSN. busy_timeout is in milliseconds.
const params = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"

// rowsPerInsert bounds one multi-row INSERT: 5 variables a row stays far
// below SQLite's limit of 32766.
const rowsPerInsert = 1000

// chunkSizes are the row counts of the multi-row statements a batch is
// cut into, largest first. Each statement is prepared once and kept
// (Ledger.prepared): parsing a statement of a thousand rows for every
// batch cost an eighth of settlement's time. A batch of n rows takes at
// most n/1000 + 15 statements.
var chunkSizes = [...]int{rowsPerInsert, 256, 64, 16, 4, 1}

// nextChunk is the number of rows of the next statement when n are left.
func nextChunk(n int) int {
	for _, size := range chunkSizes {
		if size <= n {
			return size
		}
	}
	return n
}

// stmtKey names a cached statement: its kind and its number of rows.
type stmtKey struct {
	kind string
	rows int
}

// Ledger is a ledger.Ledger in a SQLite file.
type Ledger struct {
	reads
	db *sql.DB
	// write admits one writer of this process at a time, OpenBlock first
	// (see gate).
	write gate

	stmtMu sync.Mutex
	stmts  map[stmtKey]*sql.Stmt
}

// prepared returns, for use in tx, the statement of key, made by text
// and prepared on first use. The caller closes what it gets (which
// leaves the cached statement open).
func (l *Ledger) prepared(ctx context.Context, tx *sql.Tx, key stmtKey, text func() string) (*sql.Stmt, error) {
	l.stmtMu.Lock()
	defer l.stmtMu.Unlock()
	st, ok := l.stmts[key]
	if !ok {
		var err error
		if st, err = l.db.PrepareContext(ctx, text()); err != nil {
			return nil, err
		}
		if l.stmts == nil {
			l.stmts = map[stmtKey]*sql.Stmt{}
		}
		l.stmts[key] = st
	}
	return tx.StmtContext(ctx, st), nil
}

// rowsText is a multi-row statement: head, n groups of row, tail.
func rowsText(head, row, tail string, n int) string {
	var q strings.Builder
	q.WriteString(head)
	for i := 0; i < n; i++ {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(row)
	}
	q.WriteString(tail)
	return q.String()
}

var _ ledger.Ledger = (*Ledger)(nil)

// Option changes how Open opens a ledger.
type Option func(*options)

type options struct {
	existing bool
}

// Existing makes Open open only a ledger that exists at this build's
// schema version, and create or migrate nothing: a missing file (which
// SQLite would create), a file without the ledger's tables, or a ledger
// behind this build's migrations is ledger.ErrNotMigrated; one ahead of
// them is ledger.ErrSchemaAhead, as without the option. It is for the
// tools that read a ledger (hongbao reconcile), so that a typo in a path
// is an error rather than a new, empty ledger that reconciles. The ledger
// it returns writes as any other.
func Existing() Option { return func(o *options) { o.existing = true } }

// Open opens (creating if needed) the ledger in the file at path and
// applies the pending migrations; with Existing, it opens only an
// existing ledger and creates nothing. path may carry a "sqlite:" or
// "file:" prefix; a "file:" URI is passed through with its own
// parameters.
func Open(ctx context.Context, path string, opts ...Option) (*Ledger, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	path = strings.TrimPrefix(path, "sqlite:")
	if path == "" {
		return nil, fmt.Errorf("%w: empty sqlite path", ledger.ErrInvalid)
	}
	dsn := path
	if !strings.HasPrefix(dsn, "file:") {
		dsn = "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	}
	extra := params
	if o.existing {
		if err := fileExists(path); err != nil {
			return nil, err
		}
		// Should the file go between the check and the open, SQLite
		// fails rather than create it.
		if !strings.Contains(dsn, "mode=") {
			extra += "&mode=rw"
		}
	}
	if strings.Contains(dsn, "?") {
		dsn += "&" + extra
	} else {
		dsn += "?" + extra
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: sqlite open: %w", err)
	}
	// Each new connection runs the pragmas again; keep a few idle.
	db.SetMaxIdleConns(8)
	l := &Ledger{reads: query.NewReads(db.QueryContext, db.QueryRowContext, snapshot(db), statements, wrap), db: db}
	ms, err := loadMigrations()
	if err == nil && o.existing {
		err = l.checkExisting(ctx, len(ms))
	} else if err == nil {
		err = l.applyMigrations(ctx, ms)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// fileExists checks that the file of path (a path, or a "file:" URI) is
// there, as Existing requires, before SQLite could create it.
func fileExists(path string) error {
	name := path
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		rest, _, _ = strings.Cut(rest, "?")
		rest, _, _ = strings.Cut(rest, "#")
		if auth, ok := strings.CutPrefix(rest, "//"); ok {
			// file://host/path: SQLite takes only "" or "localhost".
			_, rest, _ = strings.Cut(auth, "/")
			rest = "/" + rest
		}
		var err error
		if name, err = url.PathUnescape(rest); err != nil {
			return fmt.Errorf("%w: sqlite uri: %v", ledger.ErrInvalid, err)
		}
	}
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return migrate.NotMigrated(fmt.Sprintf("no file %s", name))
	case err != nil:
		return fmt.Errorf("ledger: sqlite open: %w", err)
	case st.IsDir():
		return fmt.Errorf("%w: sqlite path %s is a directory", ledger.ErrInvalid, name)
	}
	return nil
}

// loadMigrations reads the embedded migrations, with the Go step of
// migration 0009, which draws and stores the ledger's identity.
func loadMigrations() ([]migrate.Migration, error) {
	return migrate.Load(migrations, "migrations", map[int]migrate.Step{
		migrate.IdentityVersion: migrate.InsertIdentity(`INSERT INTO ledger_identity (id) VALUES (?) ON CONFLICT DO NOTHING`),
	})
}

// checkExisting checks, creating nothing, that the file holds the
// ledger's tables at version want. It only reads.
func (l *Ledger) checkExisting(ctx context.Context, want int) error {
	var tables bool
	if err := l.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_master
		WHERE type = 'table' AND name = 'ledger_migrations')`).Scan(&tables); err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	if !tables {
		return migrate.NotMigrated("no ledger tables in the file")
	}
	var have int
	if err := l.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM ledger_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	return migrate.Check(have, want, true)
}

// applyMigrations applies those of ms that the database lacks, in one
// BEGIN IMMEDIATE transaction: a second process starting at the same time
// waits for the write lock and then finds the schema complete.
func (l *Ledger) applyMigrations(ctx context.Context, ms []migrate.Migration) error {
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ledger_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP) STRICT`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM ledger_migrations`).Scan(&have); err != nil {
			return err
		}
		if err := migrate.Check(have, len(ms), false); err != nil {
			return err
		}
		for _, m := range ms[have:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if m.Step != nil {
				if err := m.Step(ctx, func(ctx context.Context, sql string, args ...any) error {
					_, err := tx.ExecContext(ctx, sql, args...)
					return err
				}); err != nil {
					return fmt.Errorf("%s: %w", m.Name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: migrate: %w", err)
	}
	return nil
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE) and commits it.
func (l *Ledger) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	return l.txAs(ctx, false, fn)
}

// txAs is tx for an urgent writer (urgent true), admitted before the
// normal ones waiting, or a normal one.
func (l *Ledger) txAs(ctx context.Context, urgent bool, fn func(*sql.Tx) error) error {
	if err := l.write.enter(ctx, urgent); err != nil {
		return err
	}
	defer l.write.leave()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// wrap names the operation on database errors and leaves the ledger's
// own errors as they are (query.Wrap).
func wrap(op string, err error) error { return query.Wrap(op, err, escrowGuard) }

// escrowGuard reports whether err is the escrow guard's trigger (migration
// 0005) aborting the statement.
func escrowGuard(err error) bool { return strings.Contains(err.Error(), batch.EscrowNotNegative) }

// campaignRow reads what a batch of entry checks first: the campaign's
// short key, whether its refund is recorded, and its fence (a batch
// prepared under an older one is ErrFenced). The write lock is held from
// BEGIN, so nothing changes them before the commit.
func campaignRow(ctx context.Context, tx *sql.Tx, entry, campaign string) (num int64, refunded bool, err error) {
	var fence int64
	err = tx.QueryRowContext(ctx, `SELECT num, refunded IS NOT NULL, fence FROM ledger_campaigns WHERE id = ?`,
		campaign).Scan(&num, &refunded, &fence)
	if err == nil {
		err = batch.Fenced(ctx, entry, campaign, fence)
	}
	return num, refunded, query.Funded(campaign, err)
}

// debit ends a batch of entry ("grant" or "discount") that inserted n
// entries of cents in all, as the PostgreSQL ledger's does: it adds them
// to the campaign's counters (slot 0: one writer at a time) and takes
// cents out of its escrow, the batch's last statement. A batch that
// inserted nothing is never refused; new entries for a campaign already
// refunded, or more cents than the escrow holds, are a *RefusedError and
// the transaction rolls back.
func debit(ctx context.Context, tx *sql.Tx, entry, campaign string, num int64, refunded bool, n int, cents int64) error {
	if n == 0 {
		return nil
	}
	reason := ledger.RefusedAfterRefund
	if !refunded {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_campaign_counts (campaign, slot, count, cents) VALUES (?, 0, ?, ?)
			ON CONFLICT (campaign, slot) DO UPDATE SET count = count + excluded.count, cents = cents + excluded.cents`,
			num, n, cents); err != nil {
			return err
		}
		var left int64
		err := tx.QueryRowContext(ctx, `UPDATE ledger_accounts SET balance = balance - ?2 WHERE id = ?1 AND balance >= ?2
			RETURNING balance`, ledger.EscrowAccount(campaign), cents).Scan(&left)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		reason = ledger.RefusedOverdraw
	}
	var escrow int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT balance FROM ledger_accounts WHERE id = ?), 0)`,
		ledger.EscrowAccount(campaign)).Scan(&escrow); err != nil {
		return err
	}
	return &ledger.RefusedError{Entry: entry, Campaign: campaign, Reason: reason, Escrow: escrow, Cents: cents}
}

// Fence implements ledger.Ledger. The write lock is held from BEGIN, so
// every write of the campaign before it has committed.
func (l *Ledger) Fence(ctx context.Context, campaign string) (int64, error) {
	return query.Fence(ctx, l.writes(), campaign, func(tx *sql.Tx, fence *int64) error {
		return tx.QueryRowContext(ctx, `UPDATE ledger_campaigns SET fence = fence + 1 WHERE id = ? RETURNING fence`, campaign).Scan(fence)
	})
}

// Fund implements ledger.Ledger.
func (l *Ledger) Fund(ctx context.Context, c ledger.Campaign) error {
	if err := batch.CheckFund(c); err != nil {
		return err
	}
	escrow, funding := ledger.EscrowAccount(c.ID), ledger.FundingAccount(c.Funding)
	return l.writes().Do(ctx, "fund", c.ID, func(tx *sql.Tx) error {
		err := query.SameFund(c, tx.QueryRowContext(ctx, `SELECT funding, total FROM ledger_campaigns WHERE id = ?`, c.ID))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := query.FundMatchesPackets(c, tx.QueryRowContext(ctx, `SELECT cents FROM ledger_packet_sets WHERE id = ?`, c.ID)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_campaigns (id, funding, total, rolled_up) VALUES (?, ?, ?, 0)`,
			c.ID, c.Funding, c.Total); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents)
			VALUES (?, 'fund', ?, ?, ?)`, c.ID, funding, escrow, c.Total); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO ledger_accounts (id, balance) VALUES (?1, ?3), (?2, -?3)
			ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance`, escrow, funding, c.Total)
		return err
	})
}

// ApplyGrants implements ledger.Ledger. The write lock is held from BEGIN,
// so every grant the insert skipped finds the row it collided with. User
// balances are not touched: RollUp adds them after the refund. An empty
// batch is a no-op.
func (l *Ledger) ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error) {
	return query.Apply(ctx, l.writes(), query.Grants, campaign, grants, func(tx *sql.Tx, num int64, gs []ledger.Grant) (ledger.ApplyResult, error) {
		inserted := make([]batch.Row, 0, len(gs))
		var err error
		for start := 0; start < len(gs); {
			n := nextChunk(len(gs) - start)
			if inserted, err = l.insertChunk(ctx, tx, num, gs[start:start+n], inserted); err != nil {
				return ledger.ApplyResult{}, err
			}
			start += n
		}
		var stored []batch.Row
		if ms, mu := batch.Missing(gs, inserted); ms != nil {
			if stored, err = lookup(ctx, tx, num, ms, mu); err != nil {
				return ledger.ApplyResult{}, err
			}
		}
		r, _, err := batch.Classify(gs, inserted, stored)
		return r, err
	})
}

// writes is this backend's part in the shared writes (query.Apply,
// query.Fence, query.Writes.Do): a write transaction, which holds the
// write lock from BEGIN, the campaign's row, the debit, and the identity
// a write's owner is checked against.
func (l *Ledger) writes() query.Writes[*sql.Tx] {
	return query.Writes[*sql.Tx]{Tx: l.tx, Campaign: campaignRow, Debit: debit, Wrap: wrap, Identity: l.Identity}
}

// insertChunk inserts grants with one multi-row statement, in batch order
// (so within a batch the first of two colliding grants wins), and appends
// the rows actually inserted to into.
func (l *Ledger) insertChunk(ctx context.Context, tx *sql.Tx, num int64, gs []ledger.Grant, into []batch.Row) ([]batch.Row, error) {
	// Anonymous parameters only: the driver looks up the name of every
	// parameter, and for numbered ones (?NNN) that lookup is linear, which
	// made a 500-row statement spend a third of its time there.
	st, err := l.prepared(ctx, tx, stmtKey{"grants", len(gs)}, func() string {
		return rowsText(`INSERT INTO ledger_grants (campaign, seq, user_id, cents, granted_ms) VALUES `, `(?,?,?,?,?)`,
			` ON CONFLICT DO NOTHING RETURNING seq, user_id, cents`, len(gs))
	})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	args := make([]any, 0, 5*len(gs))
	for _, g := range gs {
		var at any // NULL: the time is not known
		if g.GrantedAt > 0 {
			at = g.GrantedAt
		}
		args = append(args, num, g.Seq, g.User, g.Cents, at)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return query.Append(rows, query.GrantRows(), into)
}

// lookup reads the stored grants holding any of the given seqs or users.
func lookup(ctx context.Context, tx *sql.Tx, num int64, seqs []int64, users []string) ([]batch.Row, error) {
	// CROSS JOIN makes SQLite loop over the keys and probe the indexes;
	// left to itself, without statistics, it scanned the whole campaign
	// for the users (100,000 rows per batch).
	rows, err := tx.QueryContext(ctx, `SELECT g.seq, g.user_id, g.cents
		FROM json_each(?2) AS j CROSS JOIN ledger_grants AS g
		WHERE g.campaign = ?1 AND g.seq = j.value
		UNION
		SELECT g.seq, g.user_id, g.cents
		FROM json_each(?3) AS j CROSS JOIN ledger_grants AS g
		WHERE g.campaign = ?1 AND g.user_id = j.value`,
		num, jsonArray(seqs), jsonArray(users))
	if err != nil {
		return nil, err
	}
	return query.Append(rows, query.GrantRows(), nil)
}

// Refund implements ledger.Ledger. It leaves the users' balances to
// RollUp: the campaign stays rolled_up 0, and Balance keeps adding its
// entries from the journal. Stopping before the commit leaves nothing; a
// retry after it is a replay, a no-op.
func (l *Ledger) Refund(ctx context.Context, campaign string, cents int64) error {
	if err := batch.CheckRefund(campaign, cents); err != nil {
		return err
	}
	return l.writes().Do(ctx, "refund", campaign, func(tx *sql.Tx) error {
		var funding string
		var refunded *int64
		var escrowCents, fence int64
		err := tx.QueryRowContext(ctx, `SELECT funding, refunded, total - coalesce((SELECT sum(k.cents)
				FROM ledger_campaign_counts k WHERE k.campaign = c.num), 0), fence
			FROM ledger_campaigns c WHERE id = ?`, campaign).
			Scan(&funding, &refunded, &escrowCents, &fence)
		if done, err := query.Refunded(ctx, campaign, cents, err, fence, refunded); done || err != nil {
			return err
		}
		if err := batch.Refund(campaign, escrowCents, cents); err != nil {
			return err
		}
		escrow, fund := ledger.EscrowAccount(campaign), ledger.FundingAccount(funding)
		for _, s := range []struct {
			q    string
			args []any
		}{
			{`INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents) VALUES (?, 'refund', ?, ?, ?)`,
				[]any{campaign, escrow, fund, cents}},
			{`UPDATE ledger_accounts SET balance = balance - ? WHERE id = ?`, []any{cents, escrow}},
			{`UPDATE ledger_accounts SET balance = balance + ? WHERE id = ?`, []any{cents, fund}},
			{`UPDATE ledger_campaigns SET refunded = ? WHERE id = ?`, []any{cents, campaign}},
		} {
			if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// RollUp implements ledger.Ledger. SQLite has one writer at a time, so two
// roll-ups of one campaign run one after the other and the second finds
// it rolled up. The users' rows and the campaign's flag change in one
// commit, so a Balance statement sees the entries either in the journal
// or in the stored balance. Stopping before the commit leaves nothing: the
// campaign stays pending and a retry rolls it up.
func (l *Ledger) RollUp(ctx context.Context, campaign string) (bool, error) {
	if campaign == "" {
		return false, fmt.Errorf("%w: roll up campaign %q", ledger.ErrInvalid, campaign)
	}
	done := false
	err := l.tx(ctx, func(tx *sql.Tx) error {
		var num int64
		var refunded, rolledUp bool
		err := tx.QueryRowContext(ctx, `SELECT num, refunded IS NOT NULL, rolled_up FROM ledger_campaigns WHERE id = ?`,
			campaign).Scan(&num, &refunded, &rolledUp)
		if err != nil || !refunded || rolledUp {
			return query.Funded(campaign, err)
		}
		if _, err := tx.ExecContext(ctx, rollUp, num, ledger.UserPrefix); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_campaigns SET rolled_up = 1 WHERE num = ?`, num); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done && err == nil, wrap("roll up", err)
}

// rollUp adds every user's entries of campaign ?1 to their balance, one
// row per user (a user may have several discounts). "WHERE true" keeps
// SQLite's parser from reading ON CONFLICT as a join's ON.
const rollUp = `INSERT INTO ledger_accounts (id, balance)
SELECT ?2 || e.user_id, sum(e.cents) FROM (
	SELECT user_id, cents FROM ledger_grants WHERE campaign = ?1
	UNION ALL
	SELECT user_id, cents FROM ledger_discounts WHERE campaign = ?1) AS e
WHERE true GROUP BY e.user_id
ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance`

// Ping implements ledger.Ledger.
func (l *Ledger) Ping(ctx context.Context) error { return wrap("ping", l.db.PingContext(ctx)) }

// Close implements ledger.Ledger.
func (l *Ledger) Close() error {
	l.stmtMu.Lock()
	for _, st := range l.stmts {
		_ = st.Close()
	}
	l.stmts = nil
	l.stmtMu.Unlock()
	return l.db.Close()
}

// jsonArray encodes the keys to look up as one JSON parameter, which
// json_each unpacks: one statement whatever the number of keys.
func jsonArray(v any) string {
	b, _ := json.Marshal(v) // []int64 and []string always encode
	return string(b)
}
