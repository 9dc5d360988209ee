package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/migrate"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
	"github.com/hongbao/hongbao/ledger/ledgertest"
)

// TestBalancesDerivable checks that the balances table is what the
// entries say, after every kind of write including replays and conflicts.
func TestBalancesDerivable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "d", Funding: "ops", Total: 50}))
	gs := []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}, {Seq: 2, User: "x", Cents: 200}, {Seq: 3, User: "a", Cents: 1}}
	_, err = l.ApplyGrants(ctx, "c", gs)
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "c", gs)
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "d", []ledger.Grant{{Seq: 1, User: "a", Cents: 7}})
	require.NoError(t, err)
	require.NoError(t, l.Refund(ctx, "c", 700))
	done, err := l.RollUp(ctx, "c")
	require.NoError(t, err)
	require.True(t, done)
	applyDiscountsTwice(t, l)

	sums := func(q string) map[string]int64 {
		rows, _ := l.pool.Query(ctx, q)
		type acct struct {
			ID    string
			Cents int64
		}
		accts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[acct])
		require.NoError(t, err)
		m := map[string]int64{}
		for _, a := range accts {
			m[a.ID] = a.Cents
		}
		return m
	}
	// Every account's Balance is what the whole journal says.
	derived := sums(`WITH moves AS (
			SELECT to_account AS id, cents FROM ledger_journal
			UNION ALL SELECT from_account, -cents FROM ledger_journal)
		SELECT id, sum(cents)::bigint FROM moves GROUP BY id`)
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
			WHERE j.kind IN ('fund', 'refund') OR c.rolled_up
			UNION ALL SELECT from_account, -cents FROM ledger_journal)
		SELECT id, sum(cents)::bigint FROM moves GROUP BY id`)
	require.Equal(t, kept, stored)
	require.Equal(t, int64(100), stored["user:a"], "c's grant rolled up, d's 7 and e's 100 not yet")
	check, err := l.CheckBalances(ctx, func(d ledger.BalanceDifference) error { return fmt.Errorf("difference %+v", d) })
	require.NoError(t, err)
	require.True(t, check.OK(), "%+v", check)
}

// TestCheckBalancesTampered: balances edited by hand are reported.
func TestCheckBalancesTampered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	ledgertest.TamperedBalances(t, l, func(stmt string) error {
		_, err := l.pool.Exec(ctx, stmt)
		return err
	})
}

// TestOpenCreatesSchema: a search_path naming a schema that does not exist
// yet gets it created, so "?search_path=hongbao" is all a deployment needs.
func TestOpenCreatesSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.DSN(t) // a schema of our own, dropped at the end
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var parent string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&parent))
	child := parent + "_Ledger"
	dsn, err := pgtest.WithSearchPath(base, `"`+child+`"`)
	require.NoError(t, err)
	// Registered after pgtest's cleanup, so it runs first; conn is closed
	// by then, so it connects anew.
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{child}.Sanitize()+` CASCADE`)
		require.NoError(t, err)
	})
	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, child).Scan(&n))
	require.Equal(t, 15, n) // 14 tables and the journal view
}

func TestFirstSchema(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                "",
		"s":               "s",
		" s , public":     "s",
		`"My ""S"", x`:    `My "S"`,
		`"$user", public`: "", // PostgreSQL's default: the role's schema, not ours to create
		`$user, public`:   "",
	} {
		require.Equal(t, want, firstSchema(in), in)
	}
}

// atVersion makes a schema that the first n migrations built and returns
// its DSN, a pool on it (the caller closes it) and all the migrations.
func atVersion(t *testing.T, n int) (string, *pgxpool.Pool, []migrate.Migration) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	ms, err := loadMigrations()
	require.NoError(t, err)
	require.NoError(t, (&Ledger{pool: pool}).applyMigrations(ctx, "", ms[:n]))
	return dsn, pool, ms
}

// TestUpgradeFromV1: a database that only the first migration built, with
// a campaign settled in it, is upgraded in place by Open: the packet
// tables appear, the old rows stay, and the old campaign reads as one
// whose packets were never recorded.
func TestUpgradeFromV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, pool, ms := atVersion(t, 1)
	// The rows Fund and ApplyGrants wrote at version 1.
	_, err := pool.Exec(ctx, `
		INSERT INTO ledger_campaigns (id, funding, total, grant_count, grant_cents) VALUES ('old', 'ops', 100, 1, 30);
		INSERT INTO ledger_entries (campaign, kind, from_account, to_account, cents) VALUES ('old', 'fund', 'funding:ops', 'escrow:old', 100);
		INSERT INTO ledger_grants (campaign, seq, user_id, cents) SELECT num, 1, 'a', 30 FROM ledger_campaigns WHERE id = 'old';
		INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:old', 70), ('funding:ops', -100), ('user:a', 30), ('escrow:bad', -5)`)
	require.NoError(t, err)
	pool.Close()

	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	rows, _ := l.pool.Query(ctx, `SELECT version FROM ledger_migrations ORDER BY version`)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	want := make([]int32, len(ms))
	for i := range want {
		want[i] = int32(i + 1)
	}
	require.Equal(t, want, versions)
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

// applyDiscountsTwice funds a discount campaign and writes its discounts
// twice, one of them conflicting, for the balance checks.
func applyDiscountsTwice(t *testing.T, l ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	e := ledger.DiscountCampaign("e")
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: e, Funding: "ops", Total: 500}))
	ds := []ledger.Discount{{User: "a", Order: "1", Seq: 1, Cents: 40}, {User: "a", Order: "2", Seq: 2, Cents: 60},
		{User: "q", Order: "1", Seq: 3, Cents: 5}, {User: "x", Order: "1", Seq: 3, Cents: 5}}
	for range 2 {
		_, err := l.ApplyDiscounts(ctx, e, ds)
		require.NoError(t, err)
	}
}

// TestEscrowGuard: the database itself refuses a negative escrow, written
// by any path (here a hand-run UPDATE), and the ledger reports it as a
// refusal; funding accounts still go negative.
func TestEscrowGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 10}))
	for _, q := range []string{
		`UPDATE ledger_accounts SET balance = -1 WHERE id = 'escrow:c'`,
		`INSERT INTO ledger_accounts (id, balance) VALUES ('escrow:x', -5)`,
	} {
		_, err := l.pool.Exec(ctx, q)
		require.ErrorContains(t, err, "ledger_escrow_not_negative", q)
		require.ErrorIs(t, wrap("test", err), ledger.ErrRefused)
	}
	_, err = l.pool.Exec(ctx, `UPDATE ledger_accounts SET balance = balance - 5 WHERE id = 'funding:ops'`)
	require.NoError(t, err)
	b, err := l.Balance(ctx, "escrow:c")
	require.NoError(t, err)
	require.EqualValues(t, 10, b)
}

// TestBatchesOverlap: while one batch of a campaign holds its transaction
// open (its grants inserted, its debit not yet made), another ledger's
// batch of the same campaign commits; a Fence waits for the open batch
// and then fences off what comes after it.
func TestBatchesOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	slow, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer slow.Close()
	fast, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer fast.Close()
	require.NoError(t, fast.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1000}))

	held, release := make(chan struct{}), make(chan struct{})
	slow.beforeDebit = func() { close(held); <-release }
	slowDone := make(chan error, 1)
	go func() {
		_, err := slow.ApplyGrants(ctx, "c", []ledger.Grant{{Seq: 1, User: "a", Cents: 100}, {Seq: 2, User: "b", Cents: 200}})
		slowDone <- err
	}()
	<-held
	start := time.Now()
	res, err := fast.ApplyGrants(ctx, "c", []ledger.Grant{{Seq: 3, User: "c", Cents: 30}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	t.Logf("a batch committed in %v while another of the campaign held its transaction open", time.Since(start))
	tot, err := fast.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "ops", GrantCount: 1, GrantCents: 30, Escrow: 970}, tot)

	fenceDone := make(chan error, 1)
	go func() {
		_, err := fast.Fence(ctx, "c")
		fenceDone <- err
	}()
	// The fence waits on the open batch's share of the campaign's turn.
	require.Eventually(t, func() bool {
		var waiting bool
		err := fast.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock(%')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond)
	select {
	case err := <-fenceDone:
		t.Fatalf("fence returned while a batch was in flight: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-slowDone)
	require.NoError(t, <-fenceDone)
	_, err = fast.ApplyGrants(ledger.WithFence(ctx, 0), "c", []ledger.Grant{{Seq: 4, User: "d", Cents: 1}})
	require.ErrorIs(t, err, ledger.ErrFenced)
	tot, err = fast.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "ops", GrantCount: 3, GrantCents: 330, Escrow: 670}, tot)
}

// TestUpgradeTo8: the counters and balances of a version 7 ledger carry
// over exactly, and the refund of a campaign live at the upgrade rolls
// up each of its entries once, those written before it included.
func TestUpgradeTo8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, pool, _ := atVersion(t, 7)
	_, err := pool.Exec(ctx, ledgertest.V7Ledger)
	require.NoError(t, err)
	pool.Close()

	l, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	ledgertest.RequireUpgradedTo8(t, l)
}
