// Package ledgertest is the conformance suite every ledger.Ledger must
// pass, so the PostgreSQL and SQLite ledgers (and any later one) behave
// alike: same idempotency, same conflict reports, same balances.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// Run runs the suite. open returns a new Ledger for the test t; calls with
// the same t share one database (the first call for a t creates it
// empty), as a second process would, and open may be called from several
// goroutines at once. PerTest builds such a function.
func Run(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) ledger.Ledger)
	}{
		{"FundIdempotent", testFund},
		{"FundInvalid", testFundInvalid},
		{"ApplyGrantsInsertedReplayed", testApplyGrants},
		{"ApplyGrantsInvalid", testApplyGrantsInvalid},
		{"Conflicts", testConflicts},
		{"NotFunded", testNotFunded},
		{"Refund", testRefund},
		{"TotalsAndEscrow", testTotals},
		{"Balance", testBalance},
		{"GrantsOrder", testGrantsOrder},
		{"UserIDsKeptExactly", testUserIDs},
		{"UserIDsNotText", testUserIDsNotText},
		{"ConcurrentOverlappingBatches", testConcurrent},
		{"TwoLedgersOneDatabase", testTwoLedgers},
		{"PacketsIdempotent", testPacketsIdempotent},
		{"PacketsAgreeWithFund", testPacketsFund},
		{"PacketsInvalid", testPacketsInvalid},
		{"PacketsNotRecorded", testPacketsNotRecorded},
		{"PacketsOrder", testPacketsOrder},
		{"PacketsLarge", testPacketsLarge},
		{"UngrantedPackets", testUngrantedPackets},
		{"MismatchedGrants", testMismatchedGrants},
		{"PacketsConcurrentWriters", testPacketsConcurrent},
		{"PacketsFundRace", testPacketsFundRace},
		{"Terms", testTerms},
		{"TermsInvalid", testTermsInvalid},
		{"Blocks", testBlocks},
		{"Discounts", testDiscounts},
		{"DiscountConflicts", testDiscountConflicts},
		{"DiscountsInvalid", testDiscountsInvalid},
		{"DiscountsConcurrent", testDiscountsConcurrent},
		{"RefuseAfterRefund", testRefuseAfterRefund(grantKind)},
		{"RefuseDiscountAfterRefund", testRefuseAfterRefund(discountKind)},
		{"RefuseOverdraw", testRefuseOverdraw(grantKind)},
		{"RefuseDiscountOverdraw", testRefuseOverdraw(discountKind)},
		{"RefuseRefundOutstanding", testRefuseRefund},
		{"RefuseConcurrentOverdraw", testRefuseConcurrent},
		{"Fence", testFence},
		{"TwoWritersDisjoint", testTwoWritersDisjoint},
		{"RefundRacingBatches", testRefundRacingBatches},
		{"FenceRacingBatches", testFenceRacingBatches},
		{"RollUp", testRollUp},
		{"RollUpRacing", testRollUpRacing},
		{"ReplaysRacingExactEscrow", testReplaysRacingExactEscrow},
		{"DiscountReplaysRacing", testDiscountReplaysRacing},
		{"RefundsRacing", testRefundsRacing},
		{"BalanceDuringRollUp", testBalanceDuringRollUp},
		{"TotalsWhileBatchesCommit", testTotalsWhileBatchesCommit},
		{"CheckBalances", testCheckBalances},
		{"CheckBalancesWhileBatchesCommit", testCheckBalancesWhileBatchesCommit},
		{"Identity", testIdentity},
		{"Foreign", testForeign},
		{"Leases", testLeases},
		{"LeasesRacing", testLeasesRacing},
		{"Commitment", testCommitment},
		{"PurgeDrawData", testPurgeDrawData},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// PerTest returns an open function for Run. fresh creates an empty
// database for a test and returns its DSN (a temporary file, a new
// schema); dial opens a Ledger on a DSN. The database is created on the
// first call for a t and reused by later calls with the same t. Ledgers
// are closed when the test ends.
func PerTest(fresh func(t testing.TB) string, dial func(ctx context.Context, dsn string) (ledger.Ledger, error)) func(t *testing.T) ledger.Ledger {
	var mu sync.Mutex
	dsns := map[testing.TB]string{}
	return func(t *testing.T) ledger.Ledger {
		t.Helper()
		mu.Lock()
		dsn, ok := dsns[t]
		if !ok {
			dsn = fresh(t)
			dsns[t] = dsn
			t.Cleanup(func() { mu.Lock(); delete(dsns, t); mu.Unlock() })
		}
		mu.Unlock()
		l, err := dial(context.Background(), dsn)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, l.Close()) })
		return l
	}
}

// benchRain funds campaign c and returns its n grants, each to a new
// user.
func benchRain(b *testing.B, l ledger.Ledger, c string, n int) []ledger.Grant {
	grants := make([]ledger.Grant, n)
	var total int64
	for s := range grants {
		grants[s] = ledger.Grant{Campaign: c, Seq: int64(s), User: fmt.Sprintf("%s-u%d", c, s), Cents: 1 + int64(s%997)}
		total += grants[s].Cents
	}
	require.NoError(b, l.Fund(context.Background(), ledger.Campaign{ID: c, Funding: "bench", Total: total}))
	return grants
}

// Bench measures settling a rain of 100,000 grants in batches of 500, one
// transaction per batch as a settlement worker writes them, and reports
// grants/s. Each iteration is a new campaign with new users.
func Bench(b *testing.B, l ledger.Ledger) {
	const rain, size = 100_000, 500
	benchRains(b, l, "bench", rain, func(c string, grants []ledger.Grant) {
		for start := 0; start < rain; start += size {
			res, err := l.ApplyGrants(ctx, c, grants[start:start+size])
			if err != nil || res.Inserted != size {
				b.Fatalf("apply: %+v %v", res, err)
			}
		}
	})
}

// benchRains times rain once per iteration, on a rain of n grants of a
// new campaign (named after name) to new users, funded before the timer
// runs, and reports grants/s.
func benchRains(b *testing.B, l ledger.Ledger, name string, n int, rain func(c string, grants []ledger.Grant)) {
	prefix := fmt.Sprintf("%s-%x", name, rand.Uint64())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := fmt.Sprintf("%s-%d", prefix, i)
		grants := benchRain(b, l, c, n)
		b.StartTimer()
		rain(c, grants)
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "grants/s")
}

// BenchWriters measures settling a rain of 100,000 grants of one
// campaign split into writers disjoint parts, each written by its own
// goroutine in batches of 500 (one transaction per batch), as settle
// processes that own different shards of the campaign write them. It
// reports grants/s of the whole rain.
func BenchWriters(b *testing.B, l ledger.Ledger, writers int) {
	const rain, size = 100_000, 500
	var refund time.Duration
	benchRains(b, l, "benchw", rain, func(c string, grants []ledger.Grant) {
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Writer w owns the batches w, w+writers, ...: its part.
				for start := w * size; start < rain; start += writers * size {
					res, err := l.ApplyGrants(ctx, c, grants[start:min(start+size, rain)])
					if err == nil && res.Inserted != min(size, rain-start) {
						err = fmt.Errorf("apply: %+v", res)
					}
					if err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The refund closes the rain and the roll-up moves its users'
		// balances: timed together, on their own.
		start := time.Now()
		require.NoError(b, l.Refund(ctx, c, 0))
		_, err := l.RollUp(ctx, c)
		require.NoError(b, err)
		refund += time.Since(start)
		b.StartTimer()
	})
	b.ReportMetric(float64(refund.Milliseconds())/float64(b.N), "refund-ms")
}

// BenchReplay measures the redelivery path: a rain of 100,000 grants,
// already settled, written again in batches of 500, as after a worker
// crashed between commit and acknowledgement. Every grant must come back
// as replayed; it reports grants/s.
func BenchReplay(b *testing.B, l ledger.Ledger) {
	const rain, size = 100_000, 500
	c := fmt.Sprintf("bench-replay-%x", rand.Uint64())
	grants := benchRain(b, l, c, rain)
	settle := func(want func(ledger.ApplyResult) bool) {
		for start := 0; start < rain; start += size {
			res, err := l.ApplyGrants(ctx, c, grants[start:start+size])
			if err != nil || !want(res) {
				b.Fatalf("apply: %+v %v", res, err)
			}
		}
	}
	settle(func(r ledger.ApplyResult) bool { return r.Inserted == size })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		settle(func(r ledger.ApplyResult) bool { return r.Replayed == size })
	}
	b.ReportMetric(float64(b.N*rain)/b.Elapsed().Seconds(), "grants/s")
}

var ctx = context.Background()

func fund(t *testing.T, l ledger.Ledger, id string, total int64) {
	t.Helper()
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "ops", Total: total}))
}

func apply(t *testing.T, l ledger.Ledger, campaign string, gs ...ledger.Grant) ledger.ApplyResult {
	t.Helper()
	res, err := l.ApplyGrants(ctx, campaign, gs)
	require.NoError(t, err)
	return res
}

func g(campaign string, seq int64, user string, cents int64) ledger.Grant {
	return ledger.Grant{Campaign: campaign, Seq: seq, User: user, Cents: cents}
}

// balances returns the balances of the given accounts.
func balances(t *testing.T, l ledger.Ledger, accounts ...string) map[string]int64 {
	t.Helper()
	m := make(map[string]int64, len(accounts))
	for _, a := range accounts {
		b, err := l.Balance(ctx, a)
		require.NoError(t, err)
		m[a] = b
	}
	return m
}

func testFund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	c := ledger.Campaign{ID: "c1", Funding: "ops", Total: 1000}
	require.NoError(t, l.Fund(ctx, c))
	require.NoError(t, l.Fund(ctx, c), "a replay is a no-op")

	for _, bad := range []ledger.Campaign{
		{ID: "c1", Funding: "ops", Total: 999},
		{ID: "c1", Funding: "other", Total: 1000},
	} {
		requireConflict(t, l.Fund(ctx, bad), "fund", "c1")
	}
	require.Equal(t, map[string]int64{"escrow:c1": 1000, "funding:ops": -1000, "funding:other": 0},
		balances(t, l, "escrow:c1", "funding:ops", "funding:other"), "a replay or a conflict moves nothing")
	tot, err := l.Totals(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "ops", Escrow: 1000}, tot)
}

func testFundInvalid(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	for _, c := range []ledger.Campaign{
		{ID: "", Funding: "ops", Total: 1},
		{ID: "c", Funding: "", Total: 1},
		{ID: "c", Funding: "ops", Total: -1},
	} {
		require.ErrorIs(t, l.Fund(ctx, c), ledger.ErrInvalid, "%+v", c)
	}
}

func testApplyGrants(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	first := []ledger.Grant{g("c", 1, "a", 100), g("c", 2, "b", 200), g("", 3, "c", 300)}
	require.Equal(t, ledger.ApplyResult{Inserted: 3, InsertedCents: 600}, apply(t, l, "c", first...))
	require.Equal(t, ledger.ApplyResult{Replayed: 3}, apply(t, l, "c", first...), "a replayed batch is a no-op")
	require.Equal(t, ledger.ApplyResult{Inserted: 1, Replayed: 2, InsertedCents: 50},
		apply(t, l, "c", g("c", 2, "b", 200), g("c", 4, "d", 50), g("c", 1, "a", 100)))
	require.Equal(t, ledger.ApplyResult{}, apply(t, l, "c"), "an empty batch is a no-op")
	require.Equal(t, ledger.ApplyResult{Inserted: 1, Replayed: 1, InsertedCents: 10},
		apply(t, l, "c", g("c", 5, "e", 10), g("c", 5, "e", 10)), "an identical duplicate within a batch is a replay")

	require.Equal(t, map[string]int64{
		"user:a": 100, "user:b": 200, "user:c": 300, "user:d": 50, "user:e": 10,
		"escrow:c": 1000 - 660, "funding:ops": -1000,
	}, balances(t, l, "user:a", "user:b", "user:c", "user:d", "user:e", "escrow:c", "funding:ops"))
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(5), tot.GrantCount)
	require.Equal(t, int64(660), tot.GrantCents)
}

func testApplyGrantsInvalid(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	for _, tc := range []struct {
		name  string
		grant ledger.Grant
	}{
		{"other campaign", g("d", 1, "a", 1)},
		{"no user", g("c", 1, "", 1)},
		{"negative seq", g("c", -1, "a", 1)},
		{"zero cents", g("c", 1, "a", 0)},
		{"negative cents", g("c", 1, "a", -5)},
	} {
		_, err := l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 7, "ok", 1), tc.grant})
		require.ErrorIs(t, err, ledger.ErrInvalid, tc.name)
	}
	_, err := l.ApplyGrants(ctx, "", []ledger.Grant{g("", 1, "a", 1)})
	require.ErrorIs(t, err, ledger.ErrInvalid)
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Zero(t, tot.GrantCount, "an invalid batch writes nothing")
}

func testConflicts(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	stored := []ledger.Grant{g("c", 1, "a", 100), g("c", 2, "b", 200)}
	type conflict struct {
		seq      int64
		kind     ledger.ConflictKind
		existing ledger.Grant
	}
	for _, tc := range []struct {
		name      string
		batch     []ledger.Grant
		inserted  int
		cents     int64 // of the inserted grants
		replayed  int
		conflicts []conflict
	}{
		{"packet to another user", []ledger.Grant{g("c", 1, "x", 100)}, 0, 0, 0,
			[]conflict{{1, ledger.PacketTaken, stored[0]}}},
		{"packet with another amount", []ledger.Grant{g("c", 1, "a", 101)}, 0, 0, 0,
			[]conflict{{1, ledger.PacketTaken, stored[0]}}},
		{"user with another packet", []ledger.Grant{g("c", 3, "a", 100)}, 0, 0, 0,
			[]conflict{{3, ledger.UserHasOther, stored[0]}}},
		{"packet and user both taken", []ledger.Grant{g("c", 2, "a", 200)}, 0, 0, 0,
			[]conflict{{2, ledger.PacketTaken, stored[1]}}},
		{"within a batch: user twice", []ledger.Grant{g("c", 3, "x", 10), g("c", 4, "x", 20)}, 1, 10, 0,
			[]conflict{{4, ledger.UserHasOther, g("c", 3, "x", 10)}}},
		{"within a batch: packet twice", []ledger.Grant{g("c", 3, "x", 10), g("c", 3, "y", 10)}, 1, 10, 0,
			[]conflict{{3, ledger.PacketTaken, g("c", 3, "x", 10)}}},
		{"mixed with inserts and replays", []ledger.Grant{g("c", 5, "e", 5), stored[1], g("c", 1, "b", 100), g("c", 6, "f", 6)}, 2, 11, 1,
			[]conflict{{1, ledger.PacketTaken, stored[0]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := open(t)
			fund(t, l, "c", 10_000)
			apply(t, l, "c", stored...)
			accounts := []string{"user:a", "user:b", "user:x", "user:y", "escrow:c"}
			before := balances(t, l, accounts...)

			res := apply(t, l, "c", tc.batch...)
			require.Equal(t, tc.inserted, res.Inserted)
			require.Equal(t, tc.replayed, res.Replayed)
			require.Len(t, res.Conflicts, len(tc.conflicts))
			require.Equal(t, len(tc.batch), res.Inserted+res.Replayed+len(res.Conflicts), "every grant is accounted for")
			for i, want := range tc.conflicts {
				got := res.Conflicts[i]
				require.Equal(t, want.seq, got.Grant.Seq)
				require.Equal(t, "c", got.Grant.Campaign)
				require.Equal(t, want.kind, got.Kind)
				require.Equal(t, want.existing, got.Existing)
			}
			// Balances move by exactly the inserted grants.
			after := balances(t, l, accounts...)
			require.Equal(t, tc.cents, res.InsertedCents)
			require.Equal(t, before["escrow:c"]-tc.cents, after["escrow:c"])
			for _, a := range []string{"user:a", "user:b", "user:y"} {
				require.Equal(t, before[a], after[a], a)
			}
			tot, err := l.Totals(ctx, "c")
			require.NoError(t, err)
			require.Equal(t, int64(2+tc.inserted), tot.GrantCount)

			// A replay of the conflicting batch reports the same conflicts
			// again: an incident does not turn into a replay.
			again := apply(t, l, "c", tc.batch...)
			require.Zero(t, again.Inserted)
			require.Equal(t, res.Conflicts, again.Conflicts)
		})
	}
}

func testNotFunded(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	_, err := l.ApplyGrants(ctx, "nope", []ledger.Grant{g("nope", 1, "a", 1)})
	require.ErrorIs(t, err, ledger.ErrNotFunded)
	require.ErrorIs(t, l.Refund(ctx, "nope", 1), ledger.ErrNotFunded)
	tot, err := l.Totals(ctx, "nope")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{}, tot)
	b, err := l.Balance(ctx, "user:a")
	require.NoError(t, err)
	require.Zero(t, b)
}

func testRefund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 1000)
	apply(t, l, "c", g("c", 1, "a", 600))
	require.NoError(t, l.Refund(ctx, "c", 400))
	require.NoError(t, l.Refund(ctx, "c", 400), "a replay is a no-op")
	requireConflict(t, l.Refund(ctx, "c", 300), "refund", "c")
	require.ErrorIs(t, l.Refund(ctx, "c", -1), ledger.ErrInvalid)
	require.Equal(t, map[string]int64{"escrow:c": 0, "funding:ops": -600}, balances(t, l, "escrow:c", "funding:ops"))
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(400), tot.Refunded)
	require.True(t, tot.RefundDone)

	// A zero refund records that the refund is done.
	fund(t, l, "z", 10)
	apply(t, l, "z", g("z", 1, "a", 10))
	tot, err = l.Totals(ctx, "z")
	require.NoError(t, err)
	require.False(t, tot.RefundDone)
	require.NoError(t, l.Refund(ctx, "z", 0))
	require.NoError(t, l.Refund(ctx, "z", 0))
	require.ErrorIs(t, l.Refund(ctx, "z", 10), ledger.ErrConflict)
	tot, err = l.Totals(ctx, "z")
	require.NoError(t, err)
	require.True(t, tot.RefundDone)
	require.Zero(t, tot.Refunded)
	require.Zero(t, tot.Escrow)
}

func testTotals(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "shop", Total: 1000}))
	require.Equal(t, 3, apply(t, l, "c", g("c", 0, "a", 100), g("c", 1, "b", 200), g("c", 2, "c", 300)).Inserted)
	require.NoError(t, l.Refund(ctx, "c", 400))
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 1000, Funding: "shop", GrantCount: 3, GrantCents: 600,
		Refunded: 400, RefundDone: true, Escrow: 0}, tot)
	bs := balances(t, l, "funding:shop", "escrow:c", "user:a", "user:b", "user:c")
	require.Equal(t, map[string]int64{"funding:shop": -600, "escrow:c": 0, "user:a": 100, "user:b": 200, "user:c": 300}, bs)
	var sum int64
	for _, b := range bs {
		sum += b
	}
	require.Zero(t, sum, "double entry: the balances of all accounts sum to zero")
}

func testBalance(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c1", 500)
	fund(t, l, "c2", 700)
	apply(t, l, "c1", g("c1", 1, "alice", 120), g("c1", 2, "bob", 30))
	apply(t, l, "c2", g("c2", 9, "alice", 80))
	require.NoError(t, l.Refund(ctx, "c1", 350))
	for _, tc := range []struct {
		account string
		want    int64
	}{
		{"user:alice", 200},
		{"user:bob", 30},
		{"user:nobody", 0},
		{"escrow:c1", 0},
		{"escrow:c2", 620},
		{"funding:ops", -500 - 700 + 350},
		{"funding:nothing", 0},
		{"alice", 0}, // ids carry their kind: a bare user id is no account
	} {
		b, err := l.Balance(ctx, tc.account)
		require.NoError(t, err)
		require.Equal(t, tc.want, b, tc.account)
	}
}

func testGrantsOrder(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const n = 300
	want := make([]ledger.Grant, n)
	var total int64
	for i := range want {
		want[i] = g("c", int64(i*3), fmt.Sprintf("u%03d", n-i), int64(1+i%7))
		total += want[i].Cents
	}
	fund(t, l, "c", total)
	fund(t, l, "other", 10)
	apply(t, l, "other", g("other", 1, "u001", 1))
	shuffled := append([]ledger.Grant(nil), want...)
	rand.Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for start := 0; start < n; start += 70 {
		apply(t, l, "c", shuffled[start:min(start+70, n)]...)
	}
	var got []ledger.Grant
	require.NoError(t, l.Grants(ctx, "c", func(gr ledger.Grant) error { got = append(got, gr); return nil }))
	require.Equal(t, want, got)

	stop := errors.New("stop")
	calls := 0
	err := l.Grants(ctx, "c", func(ledger.Grant) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls, "an error from fn stops the iteration")

	require.NoError(t, l.Grants(ctx, "empty", func(ledger.Grant) error { t.Fatal("no grants expected"); return nil }))
}

// testConcurrent has several workers write overlapping batches of one
// campaign at once, as after a redelivery or a reclaim: each grant must
// land exactly once and the balances must add up.
func testConcurrent(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const n, workers = 1000, 6
	grants := make([]ledger.Grant, n)
	var total int64
	for i := range grants {
		grants[i] = g("c", int64(i), fmt.Sprintf("u%d", i), int64(1+i%13))
		total += grants[i].Cents
	}
	fund(t, l, "c", total)

	var sum ledger.ApplyResult
	for _, r := range overlappingWrites(t, l, grants, workers, nil) {
		sum.Inserted += r.Inserted
		sum.Replayed += r.Replayed
		sum.InsertedCents += r.InsertedCents
		sum.Conflicts = append(sum.Conflicts, r.Conflicts...)
	}
	require.Equal(t, ledger.ApplyResult{Inserted: n, Replayed: n*workers - n, InsertedCents: total}, sum)

	// Now with a conflicting grant per worker: reported, never inserted.
	results := overlappingWrites(t, l, grants, workers, func(w int) []ledger.Grant {
		return []ledger.Grant{g("c", int64(w), fmt.Sprintf("thief%d", w), 1), g("c", int64(n+w), fmt.Sprintf("u%d", w), 1)}
	})
	for w, r := range results {
		require.Zero(t, r.Inserted)
		require.Equal(t, n, r.Replayed)
		require.Len(t, r.Conflicts, 2, "worker %d", w)
		require.Equal(t, ledger.PacketTaken, r.Conflicts[0].Kind)
		require.Equal(t, ledger.UserHasOther, r.Conflicts[1].Kind)
		require.Equal(t, grants[w], r.Conflicts[1].Existing)
	}
	requireSettledOnce(t, l, grants, total)
	for w := range workers {
		b, err := l.Balance(ctx, ledger.UserAccount(fmt.Sprintf("thief%d", w)))
		require.NoError(t, err)
		require.Zero(t, b)
	}
}

// overlappingWrites has workers goroutines each write all grants of
// campaign "c" in batches of 50, each starting at another place, so their
// batches overlap in every way; extra, if not nil, adds grants to a
// worker's first batch. It returns each worker's summed results.
func overlappingWrites(t *testing.T, l ledger.Ledger, grants []ledger.Grant, workers int, extra func(w int) []ledger.Grant) []ledger.ApplyResult {
	t.Helper()
	const size = 50
	n := len(grants)
	var wg sync.WaitGroup
	results := make([]ledger.ApplyResult, workers)
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := w * n / workers
			for k := 0; k < n; k += size {
				var b []ledger.Grant
				for j := k; j < k+size && j < n; j++ {
					b = append(b, grants[(off+j)%n])
				}
				if k == 0 && extra != nil {
					b = append(b, extra(w)...)
				}
				res, err := l.ApplyGrants(ctx, "c", b)
				if err != nil {
					errs[w] = err
					return
				}
				results[w].Inserted += res.Inserted
				results[w].Replayed += res.Replayed
				results[w].InsertedCents += res.InsertedCents
				results[w].Conflicts = append(results[w].Conflicts, res.Conflicts...)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return results
}

// requireSettledOnce checks that campaign "c" holds exactly grants (in
// seq order), once each, and that every user's balance is their grant.
func requireSettledOnce(t *testing.T, l ledger.Ledger, grants []ledger.Grant, total int64) {
	t.Helper()
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: total, Funding: "ops", GrantCount: int64(len(grants)), GrantCents: total}, tot)
	i := 0
	require.NoError(t, l.Grants(ctx, "c", func(gr ledger.Grant) error {
		require.Equal(t, grants[i], gr)
		i++
		return nil
	}))
	require.Equal(t, len(grants), i)
	for _, gr := range grants {
		b, err := l.Balance(ctx, ledger.UserAccount(gr.User))
		require.NoError(t, err)
		require.Equal(t, gr.Cents, b, gr.User)
	}
}

// testTwoLedgersOneDatabase opens ledgers on one empty database at once,
// as two processes starting together would: the migrations must not race,
// and each ledger sees the other's writes.
func testTwoLedgers(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	const k = 3
	ls := make([]ledger.Ledger, k)
	var wg sync.WaitGroup
	for i := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls[i] = open(t) // on failure open fails t and ends this goroutine
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, l := range ls {
		require.NoError(t, l.Ping(ctx))
	}
	fund(t, ls[0], "c", 100)
	require.NoError(t, ls[1].Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 100}))
	require.Equal(t, 1, apply(t, ls[1], "c", g("c", 1, "a", 40)).Inserted)
	require.Equal(t, 1, apply(t, ls[2], "c", g("c", 1, "a", 40)).Replayed)
	tot, err := ls[2].Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, int64(60), tot.Escrow)
	b, err := ls[0].Balance(ctx, "user:a")
	require.NoError(t, err)
	require.Equal(t, int64(40), b)
}
