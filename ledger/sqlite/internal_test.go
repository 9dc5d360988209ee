package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
	"github.com/hongbao/hongbao/ledger/ledgertest"
)

func openTemp(t *testing.T) (*Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l, path
}

// TestSettings checks the connection settings durability depends on.
func TestSettings(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"busy_timeout", "10000"},
	} {
		var got string
		require.NoError(t, l.db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got))
		require.Equal(t, tc.want, got, tc.pragma)
	}
}

// TestBeginImmediate checks that a write transaction holds the write lock
// from BEGIN, before its first statement: another connection (as another
// process would) cannot start writing meanwhile.
func TestBeginImmediate(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	ctx := context.Background()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer other.Close()
	conn, err := other.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	tx, err := l.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.ErrorContains(t, err, "SQLITE_BUSY", "the ledger's BEGIN took the write lock")
	require.NoError(t, tx.Rollback())
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
}

// TestBalancesDerivable checks that the balances table is what the
// entries say, after every kind of write including replays and conflicts.
func TestBalancesDerivable(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "d", Funding: "ops", Total: 50}))
	gs := []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}, {Seq: 2, User: "x", Cents: 200}, {Seq: 3, User: "a", Cents: 1}}
	for range 2 {
		_, err := l.ApplyGrants(ctx, "c", gs)
		require.NoError(t, err)
	}
	_, err := l.ApplyGrants(ctx, "d", []ledger.Grant{{Seq: 1, User: "a", Cents: 7}})
	require.NoError(t, err)
	require.NoError(t, l.Refund(ctx, "c", 700))
	done, err := l.RollUp(ctx, "c")
	require.NoError(t, err)
	require.True(t, done)
	e := ledger.DiscountCampaign("e")
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: e, Funding: "ops", Total: 500}))
	ds := []ledger.Discount{{User: "a", Order: "1", Seq: 1, Cents: 40}, {User: "a", Order: "2", Seq: 2, Cents: 60},
		{User: "q", Order: "1", Seq: 3, Cents: 5}, {User: "x", Order: "1", Seq: 3, Cents: 5}}
	for range 2 {
		_, err := l.ApplyDiscounts(ctx, e, ds)
		require.NoError(t, err)
	}

	sums := func(q string) map[string]int64 {
		rows, err := l.db.QueryContext(ctx, q)
		require.NoError(t, err)
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var id string
			var cents int64
			require.NoError(t, rows.Scan(&id, &cents))
			m[id] = cents
		}
		require.NoError(t, rows.Err())
		return m
	}
	// Every account's Balance is what the whole journal says.
	derived := sums(`WITH moves AS (
			SELECT to_account AS id, cents FROM ledger_journal
			UNION ALL SELECT from_account, -cents FROM ledger_journal)
		SELECT id, sum(cents) FROM moves GROUP BY id`)
	require.Len(t, derived, 7) // escrow:c, escrow:d, escrow:discount:e, funding:ops, user:a, user:b, user:q; never user:x
	for id, want := range derived {
		b, err := l.Balance(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, b, id)
	}
	// The stored balances are the journal without what campaigns not
	// rolled up yet (d, discount:e) paid to users: c was refunded and
	// rolled up.
	stored := sums(`SELECT id, balance FROM ledger_accounts`)
	kept := sums(`WITH moves AS (
			SELECT j.to_account AS id, j.cents FROM ledger_journal j JOIN ledger_campaigns c ON c.id = j.campaign
			WHERE j.kind IN ('fund', 'refund') OR c.rolled_up = 1
			UNION ALL SELECT from_account, -cents FROM ledger_journal)
		SELECT id, sum(cents) FROM moves GROUP BY id`)
	require.Equal(t, kept, stored)
	require.Equal(t, int64(100), stored["user:a"], "c's grant rolled up, d's 7 and e's 100 not yet")
	check, err := l.CheckBalances(ctx, func(d ledger.BalanceDifference) error { return fmt.Errorf("difference %+v", d) })
	require.NoError(t, err)
	require.True(t, check.OK(), "%+v", check)
}

// TestCheckBalancesTampered: balances edited by hand are reported.
func TestCheckBalancesTampered(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ledgertest.TamperedBalances(t, l, func(stmt string) error {
		_, err := l.db.ExecContext(context.Background(), stmt)
		return err
	})
}

// TestNoFloats: the STRICT tables refuse a REAL in a money column, so a
// float cannot slip in through another tool writing to the file.
func TestNoFloats(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	_, err := l.db.ExecContext(context.Background(), `INSERT INTO ledger_accounts (id, balance) VALUES ('user:f', 1.5)`)
	require.Error(t, err)
}

// atVersion makes a file that the first n migrations built and returns
// its path, the database (the caller closes it) and all the migrations.
func atVersion(t *testing.T, n int) (string, *sql.DB, []migrate.Migration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := sql.Open("sqlite", "file:"+path+"?"+params)
	require.NoError(t, err)
	ms, err := loadMigrations()
	require.NoError(t, err)
	require.NoError(t, (&Ledger{db: db}).applyMigrations(context.Background(), ms[:n]))
	return path, db, ms
}

// TestUpgradeFromV1: a file that only the first migration built, with a
// campaign settled in it, is upgraded in place by Open: the packet tables
// appear, the old rows stay, and the old campaign reads as one whose
// packets were never recorded.
func TestUpgradeFromV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db, ms := atVersion(t, 1)
	// The rows Fund and ApplyGrants wrote at version 1.
	_, err := db.ExecContext(ctx, `
		INSERT INTO ledger_campaigns (id, funding, total, grant_count, grant_cents) VALUES ('old', 'ops', 100, 1, 30);
		INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents) VALUES ('old', 'fund', 'funding:ops', 'escrow:old', 100);
		INSERT INTO ledger_grants (campaign, seq, user_id, cents) SELECT num, 1, 'a', 30 FROM ledger_campaigns WHERE id = 'old';
		INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:old', 70), ('funding:ops', -100), ('user:a', 30), ('escrow:bad', -5)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	l, err := Open(ctx, path)
	require.NoError(t, err)
	defer l.Close()
	var versions string
	require.NoError(t, l.db.QueryRowContext(ctx, `SELECT group_concat(version) FROM (SELECT version FROM ledger_migrations ORDER BY version)`).Scan(&versions))
	want := make([]string, len(ms))
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	require.Equal(t, strings.Join(want, ","), versions)
	b, err := l.Balance(ctx, "escrow:bad")
	require.NoError(t, err)
	require.EqualValues(t, -5, b, "a negative escrow stored before the escrow guard does not stop the upgrade")
	tot, err := l.Totals(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", GrantCount: 1, GrantCents: 30, Escrow: 70}, tot)
	require.ErrorIs(t, l.UngrantedPackets(ctx, "old", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets)

	// A campaign created after the upgrade records its packets.
	require.NoError(t, l.WritePackets(ctx, "new", []int64{40, 60}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "new", Funding: "ops", Total: 100}))
	res, err := l.ApplyGrants(ctx, "new", []ledger.Grant{{Seq: 2, User: "a", Cents: 60}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	var free []ledger.Packet
	require.NoError(t, l.UngrantedPackets(ctx, "new", func(p ledger.Packet) error { free = append(free, p); return nil }))
	require.Equal(t, []ledger.Packet{{Seq: 1, Cents: 40}}, free)
}

// TestPacketInsertChunks writes packet counts around the insert chunk
// size, so the prepared full-chunk statement and the tail statement are
// each used alone and together.
func TestPacketInsertChunks(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	for _, n := range []int{1, packetsPerInsert - 1, packetsPerInsert, packetsPerInsert + 1, 3 * packetsPerInsert} {
		cents := make([]int64, n)
		for i := range cents {
			cents[i] = int64(1 + i%5)
		}
		id := fmt.Sprintf("c%d", n)
		require.NoError(t, l.WritePackets(ctx, id, cents))
		i := 0
		require.NoError(t, l.Packets(ctx, id, func(p ledger.Packet) error {
			require.Equal(t, ledger.Packet{Seq: int64(i + 1), Cents: cents[i]}, p)
			i++
			return nil
		}))
		require.Equal(t, n, i)
	}
}

// TestEscrowGuard: the database itself refuses a negative escrow, written
// by any path (here a hand-run UPDATE), and the ledger reports it as a
// refusal; funding accounts still go negative.
func TestEscrowGuard(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 10}))
	for _, q := range []string{
		`UPDATE ledger_accounts SET balance = -1 WHERE id = 'escrow:c'`,
		`INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:x', -5)`,
		`INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:c', -11) ON CONFLICT (id) DO UPDATE SET balance = balance + excluded.balance`,
	} {
		_, err := l.db.ExecContext(ctx, q)
		require.ErrorContains(t, err, "ledger_escrow_not_negative", q)
		require.ErrorIs(t, wrap("test", err), ledger.ErrRefused)
	}
	_, err := l.db.ExecContext(ctx, `UPDATE ledger_accounts SET balance = balance - 5 WHERE id = 'funding:ops'`)
	require.NoError(t, err)
	b, err := l.Balance(ctx, "escrow:c")
	require.NoError(t, err)
	require.EqualValues(t, 10, b)
}

// TestUpgradeTo8: the counters and balances of a version 7 ledger carry
// over exactly, and the refund of a campaign live at the upgrade rolls
// up each of its entries once, those written before it included.
func TestUpgradeTo8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, db, _ := atVersion(t, 7)
	_, err := db.ExecContext(ctx, ledgertest.V7Ledger)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	l, err := Open(ctx, path)
	require.NoError(t, err)
	defer l.Close()
	ledgertest.RequireUpgradedTo8(t, l)
}
