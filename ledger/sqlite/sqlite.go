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
	"sort"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// params are appended to every DSN. busy_timeout is in milliseconds.
const params = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"

// rowsPerInsert bounds one multi-row INSERT: 4 variables a row stays far
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
	db *sql.DB
	// write admits one writer of this process at a time. SQLite allows one
	// writer anyway; queueing here, in order and honouring ctx, is cheaper
	// than the busy handler's sleep-and-retry between our own goroutines.
	write chan struct{}

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

// Open opens (creating if needed) the ledger in the file at path and
// applies the pending migrations. path may carry a "sqlite:" or "file:"
// prefix; a "file:" URI is passed through with its own parameters.
func Open(ctx context.Context, path string) (*Ledger, error) {
	path = strings.TrimPrefix(path, "sqlite:")
	if path == "" {
		return nil, fmt.Errorf("%w: empty sqlite path", ledger.ErrInvalid)
	}
	dsn := path
	if !strings.HasPrefix(dsn, "file:") {
		dsn = "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	}
	if strings.Contains(dsn, "?") {
		dsn += "&" + params
	} else {
		dsn += "?" + params
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: sqlite open: %w", err)
	}
	// Each new connection runs the pragmas again; keep a few idle.
	db.SetMaxIdleConns(8)
	l := &Ledger{db: db, write: make(chan struct{}, 1)}
	if err := l.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// migrate applies the embedded migrations that the database lacks.
func (l *Ledger) migrate(ctx context.Context) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	return l.applyMigrations(ctx, ms)
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
		if have > len(ms) {
			return fmt.Errorf("database is at version %d, this build knows %d", have, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
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
	select {
	case l.write <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.write }()
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
// own errors as they are. The escrow guard's trigger (migration 0005)
// aborting the statement is a refusal, as the ledger's own check is.
func wrap(op string, err error) error {
	if err == nil || errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrNotFunded) ||
		errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrNoPackets) || errors.Is(err, ledger.ErrNoTerms) ||
		errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrFenced) {
		return err
	}
	if strings.Contains(err.Error(), batch.EscrowNotNegative) {
		return fmt.Errorf("ledger: %s: %w: escrow below zero (%v)", op, ledger.ErrRefused, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}

// campaignRow reads what a write of entry to the campaign's escrow checks
// first: its short key, whether its refund is recorded, and what its
// escrow holds by the campaign's own counters (funded - granted -
// refunded); a write prepared under an older fence than the campaign's is
// ErrFenced. The write lock is held from BEGIN, so nothing changes them
// before the commit.
func campaignRow(ctx context.Context, tx *sql.Tx, entry, campaign string) (num, escrow int64, refunded bool, err error) {
	var r sql.NullInt64
	var fence int64
	err = tx.QueryRowContext(ctx, `SELECT num, total - grant_cents - coalesce(refunded, 0), refunded, fence
		FROM ledger_campaigns WHERE id = ?`, campaign).Scan(&num, &escrow, &r, &fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
	}
	if err == nil {
		err = batch.Fenced(ctx, entry, campaign, fence)
	}
	return num, escrow, r.Valid, err
}

// Fence implements ledger.Ledger. The write lock is held from BEGIN, so
// every write of the campaign before it has committed.
func (l *Ledger) Fence(ctx context.Context, campaign string) (int64, error) {
	var fence int64
	err := l.tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE ledger_campaigns SET fence = fence + 1 WHERE id = ? RETURNING fence`,
			campaign).Scan(&fence)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
		}
		return err
	})
	return fence, wrap("fence", err)
}

// Fund implements ledger.Ledger.
func (l *Ledger) Fund(ctx context.Context, c ledger.Campaign) error {
	if c.ID == "" || c.Funding == "" || c.Total < 0 {
		return fmt.Errorf("%w: fund campaign %q from %q with %d cents", ledger.ErrInvalid, c.ID, c.Funding, c.Total)
	}
	escrow, funding := ledger.EscrowAccount(c.ID), ledger.FundingAccount(c.Funding)
	return wrap("fund", l.tx(ctx, func(tx *sql.Tx) error {
		var have ledger.Campaign
		err := tx.QueryRowContext(ctx, `SELECT funding, total FROM ledger_campaigns WHERE id = ?`, c.ID).
			Scan(&have.Funding, &have.Total)
		switch {
		case err == nil && have.Funding == c.Funding && have.Total == c.Total:
			return nil
		case err == nil:
			return &ledger.ConflictError{Entry: "fund", Campaign: c.ID,
				Existing: fmt.Sprintf("funding %q total %d", have.Funding, have.Total),
				Attempt:  fmt.Sprintf("funding %q total %d", c.Funding, c.Total)}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var packetCents int64
		err = tx.QueryRowContext(ctx, `SELECT cents FROM ledger_packet_sets WHERE id = ?`, c.ID).Scan(&packetCents)
		switch {
		case err == nil && packetCents != c.Total:
			return batch.FundPacketsConflict(c, packetCents)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_campaigns (id, funding, total) VALUES (?, ?, ?)`,
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
	}))
}

// ApplyGrants implements ledger.Ledger. The write lock is held from BEGIN,
// so every grant the insert skipped finds the row it collided with. An
// empty batch is a no-op.
func (l *Ledger) ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error) {
	gs, err := batch.Check(campaign, grants)
	if err != nil || len(gs) == 0 {
		return ledger.ApplyResult{}, err
	}
	escrow := ledger.EscrowAccount(campaign)
	var res ledger.ApplyResult
	err = l.tx(ctx, func(tx *sql.Tx) error {
		num, escrowCents, refunded, err := campaignRow(ctx, tx, "grant", campaign)
		if err != nil {
			return err
		}
		inserted := make([]batch.Row, 0, len(gs))
		for start := 0; start < len(gs); {
			n := nextChunk(len(gs) - start)
			if inserted, err = l.insertChunk(ctx, tx, num, gs[start:start+n], inserted); err != nil {
				return err
			}
			start += n
		}
		var stored []batch.Row
		if ms, mu := batch.Missing(gs, inserted); ms != nil {
			if stored, err = lookup(ctx, tx, num, ms, mu); err != nil {
				return err
			}
		}
		r, done, err := batch.Classify(gs, inserted, stored)
		if err != nil {
			return err
		}
		// The rows inserted are rolled back with the refusal.
		if err := batch.Debit("grant", campaign, refunded, escrowCents, r.InsertedCents, r.Inserted); err != nil {
			return err
		}
		res = r
		if len(done) == 0 {
			return nil
		}
		sort.Slice(done, func(i, j int) bool { return done[i].User < done[j].User })
		if err := l.creditUsers(ctx, tx, done); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_accounts SET balance = balance - ? WHERE id = ?`,
			r.InsertedCents, escrow); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE ledger_campaigns SET grant_count = grant_count + ?, grant_cents = grant_cents + ?
			WHERE id = ?`, r.Inserted, r.InsertedCents, campaign)
		return err
	})
	if err != nil {
		return ledger.ApplyResult{}, wrap("apply grants", err)
	}
	return res, nil
}

// insertChunk inserts grants with one multi-row statement, in batch order
// (so within a batch the first of two colliding grants wins), and appends
// the rows actually inserted to into.
func (l *Ledger) insertChunk(ctx context.Context, tx *sql.Tx, num int64, gs []ledger.Grant, into []batch.Row) ([]batch.Row, error) {
	// Anonymous parameters only: the driver looks up the name of every
	// parameter, and for numbered ones (?NNN) that lookup is linear, which
	// made a 500-row statement spend a third of its time there.
	st, err := l.prepared(ctx, tx, stmtKey{"grants", len(gs)}, func() string {
		return rowsText(`INSERT INTO ledger_grants (campaign, seq, user_id, cents) VALUES `, `(?,?,?,?)`,
			` ON CONFLICT DO NOTHING RETURNING seq, user_id, cents`, len(gs))
	})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	args := make([]any, 0, 4*len(gs))
	for _, g := range gs {
		args = append(args, num, g.Seq, g.User, g.Cents)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, into)
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
	return scanRows(rows, nil)
}

// creditUsers adds each grant to its user's balance, a multi-row upsert
// per chunk (gs in account order, so that accounts are locked in order).
func (l *Ledger) creditUsers(ctx context.Context, tx *sql.Tx, gs []ledger.Grant) error {
	for start := 0; start < len(gs); {
		n := nextChunk(len(gs) - start)
		st, err := l.prepared(ctx, tx, stmtKey{"credit", n}, func() string {
			return rowsText(`INSERT INTO ledger_accounts (id, balance) VALUES `, `(?,?)`,
				` ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance`, n)
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 2*n)
		for _, g := range gs[start : start+n] {
			args = append(args, ledger.UserAccount(g.User), g.Cents)
		}
		_, err = st.ExecContext(ctx, args...)
		st.Close()
		if err != nil {
			return err
		}
		start += n
	}
	return nil
}

func scanRows(rows *sql.Rows, into []batch.Row) ([]batch.Row, error) {
	defer rows.Close()
	for rows.Next() {
		var r batch.Row
		if err := rows.Scan(&r.Seq, &r.User, &r.Cents); err != nil {
			return nil, err
		}
		into = append(into, r)
	}
	return into, rows.Err()
}

// Refund implements ledger.Ledger.
func (l *Ledger) Refund(ctx context.Context, campaign string, cents int64) error {
	if campaign == "" || cents < 0 {
		return fmt.Errorf("%w: refund %d cents of campaign %q", ledger.ErrInvalid, cents, campaign)
	}
	return wrap("refund", l.tx(ctx, func(tx *sql.Tx) error {
		var funding string
		var refunded sql.NullInt64
		var escrowCents, fence int64
		err := tx.QueryRowContext(ctx, `SELECT funding, refunded, total - grant_cents, fence FROM ledger_campaigns WHERE id = ?`, campaign).
			Scan(&funding, &refunded, &escrowCents, &fence)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
		}
		if err != nil {
			return err
		}
		if err := batch.Fenced(ctx, "refund", campaign, fence); err != nil {
			return err
		}
		if refunded.Valid {
			if refunded.Int64 == cents {
				return nil
			}
			return &ledger.ConflictError{Entry: "refund", Campaign: campaign,
				Existing: fmt.Sprintf("%d cents", refunded.Int64), Attempt: fmt.Sprintf("%d cents", cents)}
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
	}))
}

// Totals implements ledger.Ledger. One statement reads everything, so the
// values come from one snapshot; it answers one row whether the campaign
// has a fund entry, packets, both or neither.
func (l *Ledger) Totals(ctx context.Context, campaign string) (ledger.Totals, error) {
	var t ledger.Totals
	var refunded sql.NullInt64
	err := l.db.QueryRowContext(ctx, `SELECT coalesce(c.funding, ''), coalesce(c.total, 0), coalesce(c.grant_count, 0),
			coalesce(c.grant_cents, 0), c.refunded, coalesce(a.balance, 0), coalesce(s.count, 0), coalesce(s.cents, 0)
		FROM (SELECT ?1 AS id) k
		LEFT JOIN ledger_campaigns c ON c.id = k.id
		LEFT JOIN ledger_accounts a ON a.id = ?2
		LEFT JOIN ledger_packet_sets s ON s.id = k.id`,
		campaign, ledger.EscrowAccount(campaign)).
		Scan(&t.Funding, &t.Funded, &t.GrantCount, &t.GrantCents, &refunded, &t.Escrow, &t.PacketCount, &t.PacketCents)
	if err != nil {
		return ledger.Totals{}, wrap("totals", err)
	}
	t.Refunded, t.RefundDone = refunded.Int64, refunded.Valid
	return t, nil
}

// Grants implements ledger.Ledger. It streams the rows, so a campaign of
// any size is read in constant memory.
func (l *Ledger) Grants(ctx context.Context, campaign string, fn func(ledger.Grant) error) error {
	rows, err := l.db.QueryContext(ctx, `SELECT g.seq, g.user_id, g.cents
		FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
		WHERE c.id = ? ORDER BY g.seq`, campaign)
	if err != nil {
		return wrap("grants", err)
	}
	defer rows.Close()
	for rows.Next() {
		g := ledger.Grant{Campaign: campaign}
		if err := rows.Scan(&g.Seq, &g.User, &g.Cents); err != nil {
			return wrap("grants", err)
		}
		if err := fn(g); err != nil {
			return err
		}
	}
	return wrap("grants", rows.Err())
}

// Balance implements ledger.Ledger.
func (l *Ledger) Balance(ctx context.Context, account string) (int64, error) {
	var b int64
	err := l.db.QueryRowContext(ctx, `SELECT balance FROM ledger_accounts WHERE id = ?`, account).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return b, wrap("balance", err)
}

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
