// Package postgres is the PostgreSQL ledger, for production: pgx with a
// connection pool, schema migrations under an advisory lock, and each
// grant batch written in one transaction, by COPY when its grants are all
// new and by one multi-row INSERT ... ON CONFLICT DO NOTHING RETURNING
// when some are stored already. A campaign's packets go in by one COPY.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

//go:embed migrations/*.sql
var migrations embed.FS

// lockClass is the first key of the migration advisory lock ("hbLg"); the
// second is a hash of the search_path, so ledgers in different schemas of
// one database migrate without waiting for each other.
const lockClass = 0x68624c67

// maxAttempts bounds the retries of a transaction that PostgreSQL aborted
// for a deadlock or a serialization failure; both are safe to retry
// because nothing was committed.
const maxAttempts = 5

// Ledger is a ledger.Ledger on PostgreSQL.
type Ledger struct {
	reads
	pool *pgxpool.Pool
	// ownPool says whether Close closes pool: Open made it; the host
	// lends it to NewWithPool and closes it itself.
	ownPool bool
	// beforeDebit, when set (tests), is called by a grant batch after its
	// inserts and before its debit, with its transaction open.
	beforeDebit func()
}

var _ ledger.Ledger = (*Ledger)(nil)

// Option changes how Open and NewWithPool open a ledger.
type Option func(*options)

type options struct {
	existing bool
}

// Existing makes Open and NewWithPool open only a ledger that exists at
// this build's schema version, and create or migrate nothing: not the
// schema, not a table. A schema that is missing or holds no ledger, or a
// ledger behind this build's migrations, is ledger.ErrNotMigrated; one
// ahead of them is ledger.ErrSchemaAhead, as without the option. It is
// for the tools that read a ledger (hongbao reconcile), so that a typo in
// a DSN is an error rather than a new, empty ledger that reconciles. The
// ledger it returns writes as any other.
func Existing() Option { return func(o *options) { o.existing = true } }

// Open connects to dsn (a postgres:// URL or key=value string, with pgxpool's
// pool_* parameters), creates the schema named first in a search_path
// parameter if it is missing, and applies the pending migrations (with
// Existing: checks that none is pending, and creates nothing). Put the
// ledger in its own schema with "?search_path=name": pgx sends unknown
// parameters as run-time settings of every connection. The ledger owns its
// pool: Close closes it.
func Open(ctx context.Context, dsn string, opts ...Option) (*Ledger, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres connect: %w", err)
	}
	l, err := newLedger(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return l, nil
}

// NewWithPool returns a ledger on the host's pool, for a host that keeps
// one pool for its own tables and the ledger's: it migrates through pool
// as Open does (the schema named first in the pool's search_path run-time
// parameter is created if missing; with Existing, nothing is), and every
// call of the ledger then takes its connections from pool. The host owns
// the pool: the ledger's Close leaves it open, and the host closes it,
// after the ledger's Close, when nothing of the ledger runs any more. The
// ledger holds no connection between calls, so it needs no pool of its
// own size; a session setting that the host's connections carry (a
// search_path set in AfterConnect) applies to the ledger's statements too.
func NewWithPool(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Ledger, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ledger.ErrInvalid)
	}
	return newLedger(ctx, pool, false, opts)
}

// newLedger is Open and NewWithPool once they have a pool: it migrates,
// or with Existing checks, the ledger's schema. The caller closes the
// pool on an error.
func newLedger(ctx context.Context, pool *pgxpool.Pool, ownPool bool, opts []Option) (*Ledger, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	l := &Ledger{reads: query.NewReads(pool.Query, pool.QueryRow, snapshot(pool), statements, wrap), pool: pool, ownPool: ownPool}
	schema := firstSchema(pool.Config().ConnConfig.RuntimeParams["search_path"])
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	if o.existing {
		err = l.checkExisting(ctx, schema, len(ms))
	} else {
		err = l.applyMigrations(ctx, schema, ms)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// firstSchema returns the schema tables are created in: the first entry
// of search_path, unless that is "$user" or empty.
func firstSchema(searchPath string) string {
	first, _, _ := strings.Cut(searchPath, ",")
	first = strings.TrimSpace(first)
	if len(first) >= 2 && first[0] == '"' && first[len(first)-1] == '"' {
		first = strings.ReplaceAll(first[1:len(first)-1], `""`, `"`)
	}
	if first == "$user" {
		return ""
	}
	return first
}

// loadMigrations reads the embedded migrations, with the Go step of
// migration 0009, which draws and stores the ledger's identity.
func loadMigrations() ([]migrate.Migration, error) {
	return migrate.Load(migrations, "migrations", map[int]migrate.Step{
		migrate.IdentityVersion: migrate.InsertIdentity(`INSERT INTO ledger_identity (id) VALUES ($1) ON CONFLICT DO NOTHING`),
	})
}

// checkExisting checks, creating nothing, that the ledger's tables are
// where Open would make them (in schema, or in the first schema of the
// search_path that exists when schema is "") at version want.
func (l *Ledger) checkExisting(ctx context.Context, schema string, want int) error {
	var in *string
	if schema != "" {
		in = &schema
	}
	var where *string
	var exists, tables bool
	err := l.pool.QueryRow(ctx, `SELECT s.name, s.name IS NOT NULL AND EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = s.name),
			EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = s.name AND c.relname = 'ledger_migrations')
		FROM (SELECT coalesce($1::text, current_schema()) AS name) s`, in).Scan(&where, &exists, &tables)
	if err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	switch {
	case where == nil:
		return migrate.NotMigrated("no schema of the search_path exists")
	case !exists:
		return migrate.NotMigrated(fmt.Sprintf("no schema %q", *where))
	case !tables:
		return migrate.NotMigrated(fmt.Sprintf("no ledger tables in schema %q", *where))
	}
	var have int
	if err := l.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ledger_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	return migrate.Check(have, want, true)
}

// applyMigrations applies those of ms that the database lacks. Two
// processes starting together serialise on a session advisory lock, so the
// second finds the schema complete instead of racing to create it.
func (l *Ledger) applyMigrations(ctx context.Context, schema string, ms []migrate.Migration) (err error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ledger: migrate: %w", err)
	}
	defer conn.Release()
	const key = `hashtext(current_setting('search_path'))`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, `+key+`)`, lockClass); err != nil {
		return fmt.Errorf("ledger: migrate: lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, `+key+`)`, lockClass); uerr != nil {
			// A session that may still hold the lock must not go back to
			// the pool; closing it releases the lock.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			err = errors.Join(err, fmt.Errorf("ledger: migrate: unlock: %w", uerr))
		}
	}()
	if schema != "" {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("ledger: migrate: create schema %q: %w", schema, err)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS ledger_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("ledger: migrate: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ledger_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("ledger: migrate: %w", err)
	}
	if err := migrate.Check(have, len(ms), false); err != nil {
		return fmt.Errorf("ledger: migrate: %w", err)
	}
	for _, m := range ms[have:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			if m.Step != nil {
				if err := m.Step(ctx, func(ctx context.Context, sql string, args ...any) error {
					_, err := tx.Exec(ctx, sql, args...)
					return err
				}); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO ledger_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("ledger: migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

// tx runs fn in a transaction and retries it when PostgreSQL chose it as
// a deadlock victim or could not serialise it.
func (l *Ledger) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, l.pool, fn)
		var pgErr *pgconn.PgError
		if err == nil || attempt == maxAttempts || ctx.Err() != nil ||
			!errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
			return err
		}
	}
}

// wrap names the operation on database errors and leaves the ledger's
// own errors as they are (query.Wrap).
func wrap(op string, err error) error { return query.Wrap(op, err, escrowGuard) }

// escrowGuard reports whether err is a violation of the escrow guard, the
// CHECK of migration 0005.
func escrowGuard(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == batch.EscrowNotNegative
}

// turnLockClass is the first key of the per-campaign advisory lock
// ("hbTn") that gives Refund and Fence their turn among the campaign's
// batches; the second key is the one lockCampaign uses.
const turnLockClass = 0x6862546e

// turnLockArgs are the arguments of the turn lock's functions, given the
// class ($1) and the campaign id ($2).
const turnLockArgs = `($1, hashtext(coalesce(current_schema(), '') || '/' || $2))`

// takeTurn takes the campaign's turn lock, shared by a batch (exclusive
// false) and exclusive for Refund and Fence, until the transaction ends.
//
// The campaign row's locks alone would not do: PostgreSQL lets a FOR
// SHARE request that conflicts with no holder go ahead of a FOR UPDATE
// (or UPDATE) that waits, so while batches of the campaign overlap, one
// always holding the share, a refund or a fence waits for as long as
// they keep coming. An advisory lock is queued fairly: a shared request
// waits behind an exclusive one already waiting.
func takeTurn(ctx context.Context, tx pgx.Tx, campaign string, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	_, err := tx.Exec(ctx, `SELECT `+fn+turnLockArgs, turnLockClass, campaign)
	return err
}

// shareCampaignRow takes the campaign's turn (shared) and reads its row
// FOR SHARE, with what a batch checks first: its short key, whether its
// refund is recorded and its fence (a batch prepared under an older one
// is ErrFenced). Batches of one campaign share both locks, so they run
// side by side; Refund and Fence take the turn exclusively and then lock
// the row (FOR UPDATE, UPDATE), so they wait for every batch in flight to
// commit, and a batch that asks after them waits for theirs (takeTurn) and
// then reads the row as they left it (a locking read under READ
// COMMITTED returns the newest version of the row, whatever the
// statement's snapshot). Both statements go in one round trip.
//
// No deadlock can form around it. A batch takes its locks in one order:
// the turn and the campaign row (shared), the keys it inserts, one
// counter row, and the escrow row last, in the statement before its
// commit, so the batch that holds the escrow row waits for nothing more.
// Refund and Fence take the turn first, holding nothing while they wait
// for it, and then the row, which no batch holds any more; a batch waits
// for them only at its first statement, holding nothing.
// Two batches that insert the same keys in different orders (overlapping
// redeliveries, not disjoint parts) can deadlock on those keys; PostgreSQL
// aborts one, nothing of it was committed, and tx retries it.
func shareCampaignRow(ctx context.Context, tx pgx.Tx, entry, campaign string) (num int64, refunded bool, err error) {
	var fence int64
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared`+turnLockArgs, turnLockClass, campaign)
	b.Queue(`SELECT num, refunded IS NOT NULL, fence FROM ledger_campaigns WHERE id = $1 FOR SHARE`, campaign)
	br := tx.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&num, &refunded, &fence)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = batch.Fenced(ctx, entry, campaign, fence)
	}
	return num, refunded, query.Funded(campaign, err)
}

// addCounts adds a batch to one of the campaign's counter rows
// (ledger_campaign_counts). Its writers spread over 16 slots: a connection
// adds to the slot of its backend's pid, so two concurrent writers share
// a row only when their pids agree modulo 16, and then the second waits
// for the first one's commit, no longer.
const addCounts = `INSERT INTO ledger_campaign_counts AS k (campaign, slot, count, cents)
VALUES ($1, pg_backend_pid() % 16, $2, $3)
ON CONFLICT (campaign, slot) DO UPDATE SET count = k.count + excluded.count, cents = k.cents + excluded.cents`

// debit ends a batch of entry ("grant" or "discount") that inserted n
// entries of cents in all: it adds them to the campaign's counters and
// takes cents out of its escrow. A batch that inserted nothing (replays,
// conflicts) moves nothing and is never refused. New entries for a
// campaign already refunded, or more cents than the escrow holds, are a
// *RefusedError, and the transaction, rows inserted included, rolls back.
//
// The escrow's UPDATE is the batch's last statement, so its row lock is
// held only until the commit. It is exact without the campaign's lock:
// the UPDATE waits for a concurrent batch's lock on the row and then
// applies its condition to the balance that batch committed, so two
// batches that together overdraw the escrow cannot both pass; the CHECK
// of migration 0005 is the database's own backstop behind it.
func debit(ctx context.Context, tx pgx.Tx, entry, campaign string, num int64, refunded bool, n int, cents int64) error {
	if n == 0 {
		return nil
	}
	if refunded {
		return refusal(ctx, tx, entry, campaign, ledger.RefusedAfterRefund, cents)
	}
	b := &pgx.Batch{}
	b.Queue(addCounts, num, n, cents)
	b.Queue(`UPDATE ledger_accounts SET balance = balance - $2 WHERE id = $1 AND balance >= $2 RETURNING balance`,
		ledger.EscrowAccount(campaign), cents)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	var left int64
	if err == nil {
		err = br.QueryRow().Scan(&left)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return refusal(ctx, tx, entry, campaign, ledger.RefusedOverdraw, cents)
	}
	return err
}

// refusal is the *RefusedError of a batch of cents, with the escrow's
// balance as it stands.
func refusal(ctx context.Context, tx pgx.Tx, entry, campaign string, reason ledger.Refusal, cents int64) error {
	var escrow int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT balance FROM ledger_accounts WHERE id = $1), 0)`,
		ledger.EscrowAccount(campaign)).Scan(&escrow); err != nil {
		return err
	}
	return &ledger.RefusedError{Entry: entry, Campaign: campaign, Reason: reason, Escrow: escrow, Cents: cents}
}

// Fence implements ledger.Ledger. It takes the campaign's turn
// exclusively against the share every batch holds until its commit
// (shareCampaignRow), so the writes before it have committed and those
// after it see the new fence.
func (l *Ledger) Fence(ctx context.Context, campaign string) (int64, error) {
	return query.Fence(ctx, l.writes(), campaign, func(tx pgx.Tx, fence *int64) error {
		if err := takeTurn(ctx, tx, campaign, true); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE ledger_campaigns SET fence = fence + 1 WHERE id = $1 RETURNING fence`, campaign).Scan(fence)
	})
}

// Fund implements ledger.Ledger. It takes the campaign's advisory lock,
// as WritePackets does, so the two check each other's rows.
func (l *Ledger) Fund(ctx context.Context, c ledger.Campaign) error {
	if err := batch.CheckFund(c); err != nil {
		return err
	}
	escrow, funding := ledger.EscrowAccount(c.ID), ledger.FundingAccount(c.Funding)
	return l.writes().Do(ctx, "fund", c.ID, func(tx pgx.Tx) error {
		if err := lockCampaign(ctx, tx, c.ID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO ledger_campaigns (id, funding, total, rolled_up) VALUES ($1, $2, $3, false)
			ON CONFLICT (id) DO NOTHING`, c.ID, c.Funding, c.Total)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return query.SameFund(c, tx.QueryRow(ctx, `SELECT funding, total FROM ledger_campaigns WHERE id = $1`, c.ID))
		}
		if err := query.FundMatchesPackets(c, tx.QueryRow(ctx, `SELECT cents FROM ledger_packet_sets WHERE id = $1`, c.ID)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents)
			VALUES ($1, 'fund', $2, $3, $4)`, c.ID, funding, escrow, c.Total); err != nil {
			return err
		}
		// Accounts in id order ("escrow:" < "funding:"), as everywhere.
		_, err = tx.Exec(ctx, `INSERT INTO ledger_accounts (id, balance) VALUES ($1, $3), ($2, -$3::bigint)
			ON CONFLICT (id) DO UPDATE SET balance = ledger_accounts.balance + excluded.balance`,
			escrow, funding, c.Total)
		return err
	})
}

const insertGrants = `INSERT INTO ledger_grants (campaign, seq, user_id, cents, granted_ms)
SELECT $1, g.seq, g.user_id, g.cents, nullif(g.granted_ms, 0)
FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS g(seq, user_id, cents, granted_ms, ord)
ORDER BY g.ord
ON CONFLICT DO NOTHING
RETURNING seq, user_id, cents`

// ApplyGrants implements ledger.Ledger. New grants go in with COPY (see
// copyGrants); a batch holding stored keys with INSERT ... ON CONFLICT DO
// NOTHING RETURNING, after which the keys not inserted are looked up and
// classified. The campaign's row is read FOR SHARE (shareCampaignRow), so
// batches of one campaign, such as the parts of two settle processes, run
// side by side. An insert that meets a key another batch has inserted but
// not committed waits for that commit, so every grant the insert skipped
// finds its committed counterpart in the lookup, a statement of its own.
// User balances are not touched: RollUp adds them after the refund. An
// empty batch is a no-op.
func (l *Ledger) ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error) {
	return query.Apply(ctx, l.writes(), query.Grants, campaign, grants, func(tx pgx.Tx, num int64, gs []ledger.Grant) (ledger.ApplyResult, error) {
		copied, err := copyGrants(ctx, tx, num, gs)
		if err != nil {
			return ledger.ApplyResult{}, err
		}
		r := batch.AllInserted(gs)
		if !copied {
			if r, _, err = insertGrantsClassified(ctx, tx, num, gs); err != nil {
				return ledger.ApplyResult{}, err
			}
		}
		if l.beforeDebit != nil {
			l.beforeDebit()
		}
		return r, nil
	})
}

// writes is this backend's part in the shared writes (query.Apply,
// query.Fence, query.Writes.Do): a transaction retried on deadlocks, the
// campaign's row read FOR SHARE under its shared turn, the debit, and the
// identity a write's owner is checked against.
func (l *Ledger) writes() query.Writes[pgx.Tx] {
	return query.Writes[pgx.Tx]{Tx: l.tx, Campaign: shareCampaignRow, Debit: debit, Wrap: wrap, Identity: l.Identity}
}

// insertGrantsClassified writes the grants of a batch that holds stored
// keys (or a key twice) with INSERT ... ON CONFLICT DO NOTHING RETURNING,
// looks up the keys not inserted, and classifies every grant.
func insertGrantsClassified(ctx context.Context, tx pgx.Tx, num int64, gs []ledger.Grant) (ledger.ApplyResult, []ledger.Grant, error) {
	seqs := make([]int64, len(gs))
	users := make([]string, len(gs))
	cents := make([]int64, len(gs))
	ats := make([]int64, len(gs))
	for i, g := range gs {
		seqs[i], users[i], cents[i], ats[i] = g.Seq, g.User, g.Cents, g.GrantedAt
	}
	rows, _ := tx.Query(ctx, insertGrants, num, seqs, users, cents, ats)
	inserted, err := query.Append(rows, query.GrantRows(), nil)
	if err != nil {
		return ledger.ApplyResult{}, nil, err
	}
	var stored []batch.Row
	if ms, mu := batch.Missing(gs, inserted); ms != nil {
		rows, _ := tx.Query(ctx, `SELECT seq, user_id, cents FROM ledger_grants
			WHERE campaign = $1 AND (seq = ANY($2) OR user_id = ANY($3))`, num, ms, mu)
		if stored, err = query.Append(rows, query.GrantRows(), nil); err != nil {
			return ledger.ApplyResult{}, nil, err
		}
	}
	return batch.Classify(gs, inserted, stored)
}

// copyGrants is the fast path for a batch of new grants, the common case:
// COPY into ledger_grants, about twice as fast as the INSERT ... ON
// CONFLICT, whose speculative insertion costs per row. Any key already
// stored makes the COPY fail with a unique violation; the savepoint undoes
// it, copyGrants returns copied=false, and the caller takes the INSERT ...
// ON CONFLICT path that sorts each grant out. A batch with a key twice
// goes that way at once.
func copyGrants(ctx context.Context, tx pgx.Tx, num int64, gs []ledger.Grant) (copied bool, err error) {
	if batch.HasDuplicateKeys(gs) {
		return false, nil
	}
	// In seq order: two batches that copy overlapping keys (a redelivery)
	// then meet them in one order, and the second waits for the first
	// rather than deadlocking with it.
	bySeq := func(a, b ledger.Grant) int { return cmp.Compare(a.Seq, b.Seq) }
	if !slices.IsSortedFunc(gs, bySeq) {
		gs = slices.Clone(gs)
		slices.SortFunc(gs, bySeq)
	}
	sp, err := tx.Begin(ctx) // SAVEPOINT
	if err != nil {
		return false, err
	}
	n, err := copyText(ctx, sp.Conn().PgConn(), num, gs)
	if err == nil && n != int64(len(gs)) {
		// The caller counts every grant of gs as inserted: a COPY that
		// wrote fewer must not commit.
		err = fmt.Errorf("copied %d grants of %d", n, len(gs))
	}
	if err == nil {
		err = sp.Commit(ctx) // RELEASE SAVEPOINT
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		if rerr := sp.Rollback(ctx); rerr != nil {
			return false, rerr
		}
		return false, nil
	}
	return err == nil, err
}

// Refund implements ledger.Ledger. It takes the campaign's turn
// exclusively and locks its row FOR UPDATE, so it waits for every batch
// in flight (each holds both shared until its commit) and later batches
// wait for it and then find the refund recorded. It leaves the users'
// balances to RollUp: the campaign stays rolled_up false, and Balance
// keeps adding its entries from the journal.
//
// Stopping anywhere before the commit leaves nothing; a retry writes the
// refund. A retry after the commit (a lost reply) is a replay: a no-op.
func (l *Ledger) Refund(ctx context.Context, campaign string, cents int64) error {
	if err := batch.CheckRefund(campaign, cents); err != nil {
		return err
	}
	return l.writes().Do(ctx, "refund", campaign, func(tx pgx.Tx) error {
		var funding string
		var refunded *int64
		var num, total, fence int64
		if err := takeTurn(ctx, tx, campaign, true); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT num, funding, refunded, total, fence FROM ledger_campaigns
			WHERE id = $1 FOR UPDATE`, campaign).Scan(&num, &funding, &refunded, &total, &fence)
		if done, err := query.Refunded(ctx, campaign, cents, err, fence, refunded); done || err != nil {
			return err
		}
		// A statement of its own, after the lock: its snapshot then holds
		// every batch that committed while the lock was awaited, which
		// the locking statement's snapshot, taken before, may not.
		var granted int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(cents), 0)::bigint FROM ledger_campaign_counts WHERE campaign = $1`,
			num).Scan(&granted); err != nil {
			return err
		}
		if err := batch.Refund(campaign, total-granted, cents); err != nil {
			return err
		}
		escrow, fund := ledger.EscrowAccount(campaign), ledger.FundingAccount(funding)
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents)
			VALUES ($1, 'refund', $2, $3, $4)`, campaign, escrow, fund, cents)
		b.Queue(`UPDATE ledger_accounts SET balance = balance - $2 WHERE id = $1`, escrow, cents)
		b.Queue(`UPDATE ledger_accounts SET balance = balance + $2 WHERE id = $1`, fund, cents)
		b.Queue(`UPDATE ledger_campaigns SET refunded = $2 WHERE id = $1`, campaign, cents)
		return tx.SendBatch(ctx, b).Close()
	})
}

// RollUp implements ledger.Ledger. It takes the campaign's turn and
// locks its row FOR UPDATE, as Refund does, so two roll-ups of one
// campaign run one after the other and the second, reading the row as
// the first committed it, finds it rolled up. The users' rows and the campaign's flag change in one commit, so a
// Balance statement sees the entries either in the journal or in the
// stored balance, never both or neither. Stopping before the commit
// leaves nothing: the campaign stays pending and a retry rolls it up.
func (l *Ledger) RollUp(ctx context.Context, campaign string) (bool, error) {
	if campaign == "" {
		return false, fmt.Errorf("%w: roll up campaign %q", ledger.ErrInvalid, campaign)
	}
	done := false
	err := l.tx(ctx, func(tx pgx.Tx) error {
		done = false
		var num int64
		var refunded, rolledUp bool
		if err := takeTurn(ctx, tx, campaign, true); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT num, refunded IS NOT NULL, rolled_up FROM ledger_campaigns
			WHERE id = $1 FOR UPDATE`, campaign).Scan(&num, &refunded, &rolledUp)
		if err != nil || !refunded || rolledUp {
			return query.Funded(campaign, err)
		}
		b := &pgx.Batch{}
		b.Queue(rollUpGrants, num, ledger.UserPrefix)
		b.Queue(rollUpDiscounts, num, ledger.UserPrefix)
		b.Queue(`UPDATE ledger_campaigns SET rolled_up = true WHERE num = $1`, num)
		done = true
		return tx.SendBatch(ctx, b).Close()
	})
	return done && err == nil, wrap("roll up", err)
}

// rollUpGrants and rollUpDiscounts add every user's entries of campaign
// $1 to their balance, one row per user, in account order, so two
// roll-ups paying the same users lock their rows in one order. A user
// holds one grant of a campaign, so the grants need no aggregate and come
// in order from their (campaign, user_id) key; a user may hold several
// discounts, summed first. A campaign has one kind: the other statement
// finds nothing.
const (
	rollUpGrants = `INSERT INTO ledger_accounts AS a (id, balance)
SELECT $2::text || user_id, cents FROM ledger_grants WHERE campaign = $1 ORDER BY user_id
ON CONFLICT (id) DO UPDATE SET balance = a.balance + excluded.balance`
	rollUpDiscounts = `INSERT INTO ledger_accounts AS a (id, balance)
SELECT $2::text || user_id, sum(cents) FROM ledger_discounts WHERE campaign = $1 GROUP BY user_id ORDER BY user_id
ON CONFLICT (id) DO UPDATE SET balance = a.balance + excluded.balance`
)

// Ping implements ledger.Ledger.
func (l *Ledger) Ping(ctx context.Context) error { return wrap("ping", l.pool.Ping(ctx)) }

// Close implements ledger.Ledger. It closes the pool Open made, and
// leaves open the one a host lent to NewWithPool.
func (l *Ledger) Close() error {
	if l.ownPool {
		l.pool.Close()
	}
	return nil
}
