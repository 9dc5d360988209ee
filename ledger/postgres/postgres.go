// Package postgres is the PostgreSQL ledger, for production: pgx with a
// connection pool, schema migrations under an advisory lock, and each
// grant batch written in one transaction, by COPY when its grants are all
// new and by one multi-row INSERT ... ON CONFLICT DO NOTHING RETURNING
// when some are stored already. A campaign's packets go in by one COPY.
package postgres

import (
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
	pool *pgxpool.Pool
}

var _ ledger.Ledger = (*Ledger)(nil)

// Open connects to dsn (a postgres:// URL or key=value string, with pgxpool's
// pool_* parameters), creates the schema named first in a search_path
// parameter if it is missing, and applies the pending migrations. Put the
// ledger in its own schema with "?search_path=name": pgx sends unknown
// parameters as run-time settings of every connection.
func Open(ctx context.Context, dsn string) (*Ledger, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ledger: postgres connect: %w", err)
	}
	l := &Ledger{pool: pool}
	if err := l.migrate(ctx, firstSchema(cfg.ConnConfig.RuntimeParams["search_path"])); err != nil {
		pool.Close()
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

// migrate applies the embedded migrations that the database lacks.
func (l *Ledger) migrate(ctx context.Context, schema string) error {
	ms, err := migrate.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	return l.applyMigrations(ctx, schema, ms)
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
	if have > len(ms) {
		return fmt.Errorf("ledger: migrate: database is at version %d, this build knows %d", have, len(ms))
	}
	for _, m := range ms[have:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
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
// own errors as they are. A violation of the escrow guard (migration
// 0005) is a refusal, as the ledger's own check is.
func wrap(op string, err error) error {
	if err == nil || errors.Is(err, ledger.ErrConflict) || errors.Is(err, ledger.ErrNotFunded) ||
		errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrNoPackets) || errors.Is(err, ledger.ErrNoTerms) ||
		errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrFenced) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == batch.EscrowNotNegative {
		return fmt.Errorf("ledger: %s: %w: escrow below zero (%v)", op, ledger.ErrRefused, err)
	}
	return fmt.Errorf("ledger: %s: %w", op, err)
}

// lockCampaignRow locks the campaign's row, so writes to its escrow run
// one after the other, and reads what such a write checks first: its
// short key, whether its refund is recorded, and what its escrow holds by
// the campaign's own counters (funded - granted - refunded). Those are
// columns of the locked row, read again after any wait for the lock; the
// escrow account's balance row itself is guarded by the database
// (ledger_escrow_not_negative). A write of entry prepared under an older
// fence than the campaign's is ErrFenced.
func lockCampaignRow(ctx context.Context, tx pgx.Tx, entry, campaign string) (num, escrow int64, refunded bool, err error) {
	var r *int64
	var fence int64
	err = tx.QueryRow(ctx, `SELECT num, total - grant_cents - coalesce(refunded, 0), refunded, fence
		FROM ledger_campaigns WHERE id = $1 FOR UPDATE`, campaign).Scan(&num, &escrow, &r, &fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
	}
	if err == nil {
		err = batch.Fenced(ctx, entry, campaign, fence)
	}
	return num, escrow, r != nil, err
}

// Fence implements ledger.Ledger. The UPDATE takes the campaign row's
// lock, which every write of the campaign holds until its commit, so the
// writes before it have committed and those after it see the new fence.
func (l *Ledger) Fence(ctx context.Context, campaign string) (int64, error) {
	var fence int64
	err := l.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE ledger_campaigns SET fence = fence + 1 WHERE id = $1 RETURNING fence`,
			campaign).Scan(&fence)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
		}
		return err
	})
	return fence, wrap("fence", err)
}

// Fund implements ledger.Ledger. It takes the campaign's advisory lock,
// as WritePackets does, so the two check each other's rows.
func (l *Ledger) Fund(ctx context.Context, c ledger.Campaign) error {
	if c.ID == "" || c.Funding == "" || c.Total < 0 {
		return fmt.Errorf("%w: fund campaign %q from %q with %d cents", ledger.ErrInvalid, c.ID, c.Funding, c.Total)
	}
	escrow, funding := ledger.EscrowAccount(c.ID), ledger.FundingAccount(c.Funding)
	return wrap("fund", l.tx(ctx, func(tx pgx.Tx) error {
		if err := lockCampaign(ctx, tx, c.ID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO ledger_campaigns (id, funding, total) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO NOTHING`, c.ID, c.Funding, c.Total)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var have ledger.Campaign
			if err := tx.QueryRow(ctx, `SELECT funding, total FROM ledger_campaigns WHERE id = $1`, c.ID).
				Scan(&have.Funding, &have.Total); err != nil {
				return err
			}
			if have.Funding == c.Funding && have.Total == c.Total {
				return nil
			}
			return &ledger.ConflictError{Entry: "fund", Campaign: c.ID,
				Existing: fmt.Sprintf("funding %q total %d", have.Funding, have.Total),
				Attempt:  fmt.Sprintf("funding %q total %d", c.Funding, c.Total)}
		}
		var packetCents int64
		err = tx.QueryRow(ctx, `SELECT cents FROM ledger_packet_sets WHERE id = $1`, c.ID).Scan(&packetCents)
		switch {
		case err == nil && packetCents != c.Total:
			return batch.FundPacketsConflict(c, packetCents)
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
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
	}))
}

const insertGrants = `INSERT INTO ledger_grants (campaign, seq, user_id, cents)
SELECT $1, g.seq, g.user_id, g.cents
FROM unnest($2::bigint[], $3::text[], $4::bigint[]) WITH ORDINALITY AS g(seq, user_id, cents, ord)
ORDER BY g.ord
ON CONFLICT DO NOTHING
RETURNING seq, user_id, cents`

// ApplyGrants implements ledger.Ledger. New grants go in with COPY (see
// copyGrants); a batch holding stored keys with INSERT ... ON CONFLICT DO
// NOTHING RETURNING, after which the keys not inserted are looked up and
// classified. The campaign row is locked first, so batches of one campaign
// run one after the other: that keeps two overlapping batches from
// deadlocking on each other's unique keys, and every grant the insert
// skipped finds its committed counterpart. An empty batch is a no-op.
func (l *Ledger) ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error) {
	gs, err := batch.Check(campaign, grants)
	if err != nil || len(gs) == 0 {
		return ledger.ApplyResult{}, err
	}
	escrow := ledger.EscrowAccount(campaign)
	var res ledger.ApplyResult
	err = l.tx(ctx, func(tx pgx.Tx) error {
		num, escrowCents, refunded, err := lockCampaignRow(ctx, tx, "grant", campaign)
		if err != nil {
			return err
		}
		copied, err := copyGrants(ctx, tx, num, gs)
		if err != nil {
			return err
		}
		r, done := batch.AllInserted(gs), gs
		if !copied {
			if r, done, err = insertGrantsClassified(ctx, tx, num, gs); err != nil {
				return err
			}
		}
		// The rows inserted are rolled back with the refusal.
		if err := batch.Debit("grant", campaign, refunded, escrowCents, r.InsertedCents, r.Inserted); err != nil {
			return err
		}
		res = r
		if len(done) == 0 {
			return nil
		}
		// Balances move only for the rows inserted. User accounts are
		// locked in id order, so two campaigns paying the same users
		// cannot deadlock. The statement makes the account ids (prefix
		// || user, as ledger.UserAccount does), so no string is made
		// per grant here.
		slices.SortFunc(done, func(a, b ledger.Grant) int { return strings.Compare(a.User, b.User) })
		users := make([]string, len(done))
		amounts := make([]int64, len(done))
		for i, g := range done {
			users[i], amounts[i] = g.User, g.Cents
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO ledger_accounts (id, balance)
			SELECT $3::text || u.id, u.cents FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(id, cents, ord)
			ORDER BY u.ord
			ON CONFLICT (id) DO UPDATE SET balance = ledger_accounts.balance + excluded.balance`, users, amounts, ledger.UserPrefix)
		b.Queue(`UPDATE ledger_accounts SET balance = balance - $2 WHERE id = $1`, escrow, r.InsertedCents)
		b.Queue(`UPDATE ledger_campaigns SET grant_count = grant_count + $2, grant_cents = grant_cents + $3
			WHERE id = $1`, campaign, r.Inserted, r.InsertedCents)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return ledger.ApplyResult{}, wrap("apply grants", err)
	}
	return res, nil
}

// insertGrantsClassified writes the grants of a batch that holds stored
// keys (or a key twice) with INSERT ... ON CONFLICT DO NOTHING RETURNING,
// looks up the keys not inserted, and classifies every grant.
func insertGrantsClassified(ctx context.Context, tx pgx.Tx, num int64, gs []ledger.Grant) (ledger.ApplyResult, []ledger.Grant, error) {
	seqs := make([]int64, len(gs))
	users := make([]string, len(gs))
	cents := make([]int64, len(gs))
	for i, g := range gs {
		seqs[i], users[i], cents[i] = g.Seq, g.User, g.Cents
	}
	rows, _ := tx.Query(ctx, insertGrants, num, seqs, users, cents)
	inserted, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return ledger.ApplyResult{}, nil, err
	}
	var stored []batch.Row
	if ms, mu := batch.Missing(gs, inserted); ms != nil {
		rows, _ := tx.Query(ctx, `SELECT seq, user_id, cents FROM ledger_grants
			WHERE campaign = $1 AND (seq = ANY($2) OR user_id = ANY($3))`, num, ms, mu)
		if stored, err = pgx.CollectRows(rows, scanRow); err != nil {
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
	sp, err := tx.Begin(ctx) // SAVEPOINT
	if err != nil {
		return false, err
	}
	_, err = copyText(ctx, sp.Conn().PgConn(), num, gs)
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

func scanRow(row pgx.CollectableRow) (batch.Row, error) {
	var r batch.Row
	err := row.Scan(&r.Seq, &r.User, &r.Cents)
	return r, err
}

// Refund implements ledger.Ledger.
func (l *Ledger) Refund(ctx context.Context, campaign string, cents int64) error {
	if campaign == "" || cents < 0 {
		return fmt.Errorf("%w: refund %d cents of campaign %q", ledger.ErrInvalid, cents, campaign)
	}
	return wrap("refund", l.tx(ctx, func(tx pgx.Tx) error {
		var funding string
		var refunded *int64
		var escrowCents, fence int64
		err := tx.QueryRow(ctx, `SELECT funding, refunded, total - grant_cents, fence FROM ledger_campaigns WHERE id = $1 FOR UPDATE`, campaign).
			Scan(&funding, &refunded, &escrowCents, &fence)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", ledger.ErrNotFunded, campaign)
		}
		if err != nil {
			return err
		}
		if err := batch.Fenced(ctx, "refund", campaign, fence); err != nil {
			return err
		}
		if refunded != nil {
			if *refunded == cents {
				return nil
			}
			return &ledger.ConflictError{Entry: "refund", Campaign: campaign,
				Existing: fmt.Sprintf("%d cents", *refunded), Attempt: fmt.Sprintf("%d cents", cents)}
		}
		if err := batch.Refund(campaign, escrowCents, cents); err != nil {
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
	}))
}

// Totals implements ledger.Ledger. One statement reads everything, so the
// values come from one snapshot; it answers one row whether the campaign
// has a fund entry, packets, both or neither.
func (l *Ledger) Totals(ctx context.Context, campaign string) (ledger.Totals, error) {
	var t ledger.Totals
	var refunded *int64
	err := l.pool.QueryRow(ctx, `SELECT coalesce(c.funding, ''), coalesce(c.total, 0), coalesce(c.grant_count, 0),
			coalesce(c.grant_cents, 0), c.refunded, coalesce(a.balance, 0), coalesce(s.count, 0), coalesce(s.cents, 0)
		FROM (SELECT $1::text AS id) k
		LEFT JOIN ledger_campaigns c ON c.id = k.id
		LEFT JOIN ledger_accounts a ON a.id = $2
		LEFT JOIN ledger_packet_sets s ON s.id = k.id`,
		campaign, ledger.EscrowAccount(campaign)).
		Scan(&t.Funding, &t.Funded, &t.GrantCount, &t.GrantCents, &refunded, &t.Escrow, &t.PacketCount, &t.PacketCents)
	if err != nil {
		return ledger.Totals{}, wrap("totals", err)
	}
	if refunded != nil {
		t.Refunded, t.RefundDone = *refunded, true
	}
	return t, nil
}

// Grants implements ledger.Ledger. It streams the rows, so a campaign of
// any size is read in constant memory.
func (l *Ledger) Grants(ctx context.Context, campaign string, fn func(ledger.Grant) error) error {
	rows, err := l.pool.Query(ctx, `SELECT g.seq, g.user_id, g.cents
		FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
		WHERE c.id = $1 ORDER BY g.seq`, campaign)
	if err != nil {
		return wrap("grants", err)
	}
	defer rows.Close()
	// Scanned into locals, not into a Grant's fields: their addresses
	// would move every row's Grant to the heap.
	var seq, cents int64
	var user string
	for rows.Next() {
		if err := rows.Scan(&seq, &user, &cents); err != nil {
			return wrap("grants", err)
		}
		if err := fn(ledger.Grant{Campaign: campaign, Seq: seq, User: user, Cents: cents}); err != nil {
			return err
		}
	}
	return wrap("grants", rows.Err())
}

// Balance implements ledger.Ledger.
func (l *Ledger) Balance(ctx context.Context, account string) (int64, error) {
	var b int64
	err := l.pool.QueryRow(ctx, `SELECT balance FROM ledger_accounts WHERE id = $1`, account).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return b, wrap("balance", err)
}

// Ping implements ledger.Ledger.
func (l *Ledger) Ping(ctx context.Context) error { return wrap("ping", l.pool.Ping(ctx)) }

// Close implements ledger.Ledger.
func (l *Ledger) Close() error {
	l.pool.Close()
	return nil
}
