package settle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openSQLite(t *testing.T) ledger.Ledger {
	t.Helper()
	return openLedgerAt(t, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
}

func openLedgerAt(t *testing.T, dsn string) ledger.Ledger {
	t.Helper()
	l, err := open.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

type env struct {
	eng   *hongbao.Engine
	redis *testenv.Redis
	l     ledger.Ledger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	return &env{eng: eng, redis: r, l: openSQLite(t)}
}

// worker returns a worker that settles only the given campaigns (the
// shared Redis holds other tests' campaigns too).
func (e *env) worker(t *testing.T, l ledger.Ledger, consumer string, only ...string) *settle.Worker {
	t.Helper()
	w, err := settle.New(settle.Config{
		Redis: e.redis.Client, Ledger: l, Consumer: consumer, Logger: quiet(),
		ReclaimIdle: 200 * time.Millisecond, Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Only: only,
	})
	require.NoError(t, err)
	return w
}

func rain(t *testing.T, eng *hongbao.Engine, id string, users int) (granted int64, cents int64) {
	t.Helper()
	var wg sync.WaitGroup
	var n, c atomic.Int64
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := eng.Grab(context.Background(), id, "u"+strconv.Itoa(u))
			if !assert.NoError(t, err) { // FailNow must not run off the test's goroutine
				return
			}
			if g.Outcome == hongbao.Granted {
				n.Add(1)
				c.Add(g.Cents)
			}
		}()
	}
	wg.Wait()
	return n.Load(), c.Load()
}

func TestSettleRainThenRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 3000})
	require.NoError(t, err)

	w := e.worker(t, e.l, "w1", c.ID)
	require.NoError(t, w.Start(ctx))
	granted, cents := rain(t, e.eng, c.ID, 2000) // fewer users than packets: a refund remains
	require.EqualValues(t, 2000, granted)
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Equal(t, 1_000_000-cents, st.RefundedCents)
	require.Zero(t, st.RemainingCents)

	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2000, tot.GrantCount)
	require.Equal(t, cents, tot.GrantCents)
	require.Equal(t, 1_000_000-cents, tot.Refunded)
	require.Zero(t, tot.Escrow, "escrow reaches exactly 0 when settled")
	fundBal, err := e.l.Balance(ctx, "funding:"+hongbao.DefaultFunding)
	require.NoError(t, err)
	require.LessOrEqual(t, fundBal, -cents) // other tests may share the funding account

	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, 2000, rep.GrantedLedger)

	// Settled campaigns leave the registry and expire after retention.
	ids, err := redisstore.New(e.redis.Client).Campaigns(ctx, redisstore.RedPacket)
	require.NoError(t, err)
	require.NotContains(t, ids, c.ID)
	ttl, err := e.redis.Client.Do(ctx, e.redis.Client.B().Pttl().Key(redisstore.Default.CampaignKeys(c.ID).Meta).Build()).AsInt64()
	require.NoError(t, err)
	require.Greater(t, ttl, int64(0))

	// A second worker pass, or a replay of everything, changes nothing.
	w2 := e.worker(t, e.l, "w2", c.ID)
	_, err = w2.Drain(ctx)
	require.NoError(t, err)
	tot2, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, tot, tot2)
}

// TestMalformedEntryAlone: a malformed entry in the middle of a batch ends
// alone in the dead stream; the rest of its batch settles.
func TestMalformedEntryAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	k := redisstore.Default.CampaignKeys(c.ID)
	rc := e.redis.Client
	for i := 0; i < 2; i++ {
		_, err := e.eng.Grab(ctx, c.ID, "before"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	require.NoError(t, rc.Do(ctx, rc.B().Xadd().Key(k.Grants).Id("*").FieldValue().FieldValue("mallory", "not-a-packet").Build()).Error())
	for i := 0; i < 3; i++ {
		_, err := e.eng.Grab(ctx, c.ID, "after"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	// One read takes four entries: the bad one is third of its batch.
	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5, tot.GrantCount)
	require.EqualValues(t, 1, w.Stats().Malformed)
	dead, err := rc.Do(ctx, rc.B().Xrange().Key(k.Dead).Start("-").End("+").Build()).AsXRange()
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "mallory", dead[0].FieldValues["user"])
	require.Equal(t, "not-a-packet", dead[0].FieldValues["packet"])

	rep, err := settle.Reconcile(ctx, rc, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 1, rep.Dead)

	// Closed with a dead entry, the campaign is not refunded: the dead
	// entry waits for an operator.
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
}

// TestConflictIsAnIncident: a grant the ledger already holds for another
// user is never swallowed: it goes to the dead stream and reconcile says so.
func TestConflictIsAnIncident(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 300, Count: 3, Split: "fixed"})
	require.NoError(t, err)
	g, err := e.eng.Grab(ctx, c.ID, "alice")
	require.NoError(t, err)
	// Somebody else's row for alice's packet is already in the ledger.
	require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: hongbao.DefaultFunding, Total: 300}))
	_, err = e.l.ApplyGrants(ctx, c.ID, []ledger.Grant{{Campaign: c.ID, Seq: g.Seq, User: "mallory", Cents: g.Cents}})
	require.NoError(t, err)
	_, err = e.eng.Grab(ctx, c.ID, "bob")
	require.NoError(t, err)

	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, w.Stats().Conflicts)
	g2, err := e.redis.Client.Do(ctx, e.redis.Client.B().Xlen().Key(redisstore.Default.CampaignKeys(c.ID).Dead).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, g2)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.NotEmpty(t, rep.Differences)
}

// flaky is a ledger whose database "goes away" on demand.
type flaky struct {
	ledger.Ledger
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (f *flaky) ApplyGrants(ctx context.Context, c string, g []ledger.Grant) (ledger.ApplyResult, error) {
	if f.down.Load() {
		return ledger.ApplyResult{}, errDown
	}
	return f.Ledger.ApplyGrants(ctx, c, g)
}
func (f *flaky) Ping(ctx context.Context) error {
	if f.down.Load() {
		return errDown
	}
	return f.Ledger.Ping(ctx)
}
func (f *flaky) Fund(ctx context.Context, c ledger.Campaign) error {
	if f.down.Load() {
		return errDown
	}
	return f.Ledger.Fund(ctx, c)
}

// TestOutage: the database is unreachable for longer than the reclaim
// idle time; the worker backs off, nothing is dead-lettered, and when the
// database returns everything settles exactly once.
func TestOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100000, Count: 500})
	require.NoError(t, err)
	f := &flaky{Ledger: e.l}
	w := e.worker(t, f, "w1", c.ID)
	require.NoError(t, w.Start(ctx))
	rain(t, e.eng, c.ID, 200)
	f.down.Store(true)
	rain(t, e.eng, c.ID, 500) // 200 of these are repeats
	// A consumer that died holding an entry: during the outage it must not
	// be reclaimed, however long it idles.
	_, err = e.eng.Grab(ctx, c.ID, "held-by-the-dead")
	require.NoError(t, err)
	store := redisstore.New(e.redis.Client)
	held, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "dead", 1, false)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.Stats().Failures >= 3 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(400 * time.Millisecond) // longer than ReclaimIdle while down
	// Still during the outage: the dead consumer's entry (if it got one)
	// was not reclaimed, and the worker did not keep re-reading its own
	// pending entries (each re-read would raise their delivery count).
	rc := e.redis.Client
	pend, err := rc.Do(ctx, rc.B().Xpending().Key(redisstore.Default.CampaignKeys(c.ID).Grants).Group(redisstore.SettleGroup).
		Start("-").End("+").Count(10000).Build()).ToArray()
	require.NoError(t, err)
	deadHolds := 0
	for _, p := range pend {
		f, err := p.ToArray()
		require.NoError(t, err)
		entry, _ := f[0].ToString()
		consumer, _ := f[1].ToString()
		count, _ := f[3].AsInt64()
		if consumer == "dead" {
			deadHolds++
		}
		require.LessOrEqual(t, count, int64(2), "entry %s at %s delivered %d times during the outage", entry, consumer, count)
	}
	require.Equal(t, len(held), deadHolds, "an entry was reclaimed from the dead consumer during the outage")
	f.down.Store(false)
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, 500, rep.GrantedLedger)
	require.Zero(t, rep.Dead)
}

// TestRestartReadsOwnPending: entries delivered to a worker that died
// before acknowledging are settled by its successor of the same name, and
// by another consumer after the idle time.
func TestRestartReadsOwnPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100000, Count: 300})
	require.NoError(t, err)
	for u := 0; u < 20; u++ { // one at a time: one stream entry each
		_, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
	}
	store := redisstore.New(e.redis.Client)
	// Two consumers read entries and die before writing them.
	got, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "crashed", 2, false)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	got2, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "gone-for-good", 1, false)
	require.NoError(t, err)
	require.NotEmpty(t, got2)

	w := e.worker(t, e.l, "crashed", c.ID)
	require.Eventually(t, func() bool {
		_, err := w.Drain(ctx)
		require.NoError(t, err)
		g, err := store.Group(ctx, redisstore.Default.CampaignKeys(c.ID))
		require.NoError(t, err)
		return g.Pending == 0
	}, 5*time.Second, 50*time.Millisecond)
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 20, tot.GrantCount)
}

// TestTrimKeepsUnsettled: with a lagging consumer, no undelivered or
// pending entry is ever trimmed.
func TestTrimKeepsUnsettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100000, Count: 100})
	require.NoError(t, err)
	store := redisstore.New(e.redis.Client)
	for i := 0; i < 10; i++ {
		_, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	// The lagging consumer holds entries 3 and 4 pending; 1 and 2 are
	// acknowledged; 5..10 were never delivered.
	es, err := store.ReadGroup(ctx, redisstore.Default.CampaignKeys(c.ID), "lagging", 4, false)
	require.NoError(t, err)
	require.Len(t, es, 4)
	require.NoError(t, store.Ack(ctx, redisstore.Default.CampaignKeys(c.ID), es[0].ID, es[1].ID))
	g, err := store.Group(ctx, redisstore.Default.CampaignKeys(c.ID))
	require.NoError(t, err)
	require.NoError(t, store.TrimSettled(ctx, redisstore.Default.CampaignKeys(c.ID), g))
	left, err := e.redis.Client.Do(ctx, e.redis.Client.B().Xrange().Key(redisstore.Default.CampaignKeys(c.ID).Grants).Start("-").End("+").Build()).AsXRange()
	require.NoError(t, err)
	require.Len(t, left, 8, "only the two acknowledged entries are trimmed")
	require.Equal(t, es[2].ID, left[0].ID)

	// Everything delivered and acknowledged: trimming keeps at most the
	// last delivered entry.
	w := e.worker(t, e.l, "lagging", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	n, err := e.redis.Client.Do(ctx, e.redis.Client.B().Xlen().Key(redisstore.Default.CampaignKeys(c.ID).Grants).Build()).AsInt64()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(1))
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	// The two entries acknowledged by hand never reach the ledger: the
	// acknowledgement is the point of no return, which is why the worker
	// gives it only after the commit.
	require.EqualValues(t, 8, tot.GrantCount)
}

// TestSeveralWorkers: workers with different consumer names share a
// campaign's stream; every grant is written exactly once.
func TestSeveralWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1_000_000, Count: 2000})
	require.NoError(t, err)
	var ws []*settle.Worker
	for i := 0; i < 3; i++ {
		w := e.worker(t, e.l, "w"+strconv.Itoa(i), c.ID)
		require.NoError(t, w.Start(ctx))
		ws = append(ws, w)
	}
	// Many small batches, so that every worker gets some entries.
	for b := 0; b < 100; b++ {
		var wg sync.WaitGroup
		for u := 0; u < 25; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.eng.Grab(ctx, c.ID, "b"+strconv.Itoa(b)+"-"+strconv.Itoa(u))
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
	}
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	var total settle.Stats
	for _, w := range ws {
		w.Stop()
		_, err := w.Drain(ctx)
		require.NoError(t, err)
		s := w.Stats()
		total.Grants += s.Grants
		total.Refunds += s.Refunds
	}
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.EqualValues(t, rep.GrantedLedger, total.Grants, "each grant written once, by one worker")
	require.EqualValues(t, 1, total.Refunds, "one worker settles the campaign")
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, tot.RefundDone)
	require.Equal(t, rep.TotalCents-rep.GrantedCentsLedger, tot.Refunded)
	require.Zero(t, tot.Escrow)
}

// TestReconcileKeepsSummaryLines: with more grant-by-grant differences than
// a report lists, the lines about the campaign as a whole (here: unsettled
// entries) are still there.
func TestReconcileKeepsSummaryLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 30000, Count: 300})
	require.NoError(t, err)
	granted, _ := rain(t, e.eng, c.ID, 250)
	require.EqualValues(t, 250, granted)
	// Nothing settled: every grant is missing from the ledger.
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.GreaterOrEqual(t, rep.DifferenceCount, 250)
	missing := 0
	for _, d := range rep.Differences {
		if strings.HasPrefix(d, "missing from the ledger") {
			missing++
		}
	}
	require.Equal(t, 100, missing, "grant-by-grant lines are capped")
	require.Contains(t, strings.Join(rep.Differences, "\n"), "grants stream entries are not settled yet")
}

// TestReconcileFindsTamperedClaims: after a clean settlement, claims
// changed in Redis behind the ledger's back are each reported: a user
// moved onto another user's packet (claimed twice, and the ledger's grant
// no longer claimed), a user given a second packet on another shard (held
// twice, and in the pool).
func TestReconcileFindsTamperedClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 30000, Count: 300, Shards: 2})
	require.NoError(t, err)
	granted, _ := rain(t, e.eng, c.ID, 200)
	require.EqualValues(t, 200, granted)
	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "before tampering: %v", rep.Differences)

	layout := redisstore.Default.Layout(c.ID, 2)
	rc := e.redis.Client
	claimsOf := func(k redisstore.Keys) map[string]string {
		m, err := rc.Do(ctx, rc.B().Hgetall().Key(k.Claims).Build()).AsStrMap()
		require.NoError(t, err)
		return m
	}
	c0, c1 := claimsOf(layout[0]), claimsOf(layout[1])
	require.NotEmpty(t, c0)
	require.NotEmpty(t, c1)
	var a, b string
	for u := range c0 {
		if a == "" {
			a = u
		} else if b == "" {
			b = u
		}
	}
	// a now claims b's packet on shard 0.
	require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(layout[0].Claims).FieldValue().FieldValue(a, c0[b]).Build()).Error())
	// b also holds a packet still in shard 1's pool.
	pooled, err := rc.Do(ctx, rc.B().Lindex().Key(layout[1].Pool).Index(0).Build()).ToString()
	require.NoError(t, err)
	require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(layout[1].Claims).FieldValue().FieldValue(b, pooled).Build()).Error())

	rep, err = settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	all := strings.Join(rep.Differences, "\n")
	seqA, _, _ := strings.Cut(c0[a], ":")
	seqB, _, _ := strings.Cut(c0[b], ":")
	seqP, _, _ := strings.Cut(pooled, ":")
	for _, want := range []string{
		"packet " + seqB + " is claimed by ",                      // a and b on one packet
		"extra in the ledger: \"" + a + "\" holds packet " + seqA, // a's ledger grant, no longer claimed
		"user \"" + b + "\" holds packets ",                       // b on two shards
		"packet " + seqP + " is in the pool and claimed by \"" + b + "\"",
	} {
		require.Contains(t, all, want)
	}
}

// failingGrants is a ledger whose Grants fails after its first grant.
type failingGrants struct{ ledger.Ledger }

var errGrantsRead = errors.New("grants read failed")

func (f failingGrants) Grants(ctx context.Context, id string, fn func(ledger.Grant) error) error {
	first := true
	err := f.Ledger.Grants(ctx, id, func(g ledger.Grant) error {
		if !first {
			return errGrantsRead
		}
		first = false
		return fn(g)
	})
	return err
}

// TestReconcileLedgerReadFails: a read of the ledger's grants that fails
// half way (they are read beside Redis's claims) fails the reconcile, it
// does not report a clean or a partial comparison.
func TestReconcileLedgerReadFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 30000, Count: 300})
	require.NoError(t, err)
	granted, _ := rain(t, e.eng, c.ID, 50)
	require.EqualValues(t, 50, granted)
	_, err = e.worker(t, e.l, "w1", c.ID).Drain(ctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", failingGrants{e.l}, c.ID)
	require.ErrorIs(t, err, errGrantsRead)
	require.Nil(t, rep)
}
