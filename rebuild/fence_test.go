package rebuild_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/rebuild"
	"github.com/hongbao/hongbao/settle"
)

// heldBatch is the ledger of a settlement worker whose first grants
// batch, read from the stream, waits before its commit until release is
// closed, then reports what the ledger answered on result.
type heldBatch struct {
	ledger.Ledger
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	result  chan error
}

func newHeldBatch(l ledger.Ledger) *heldBatch {
	return &heldBatch{Ledger: l, entered: make(chan struct{}), release: make(chan struct{}), result: make(chan error, 1)}
}

func (h *heldBatch) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return h.Ledger.ApplyGrants(ctx, c, gs)
	}
	close(h.entered)
	select {
	case <-h.release:
	case <-ctx.Done():
		h.result <- ctx.Err()
		return ledger.ApplyResult{}, ctx.Err()
	}
	res, err := h.Ledger.ApplyGrants(ctx, c, gs)
	h.result <- err
	return res, err
}

// landAfterRead is the rebuild's ledger: once the rebuild has read the
// ledger's grants with the campaign frozen (the read it plans from), it
// lets the held batch go on and waits for the ledger's answer to it.
type landAfterRead struct {
	ledger.Ledger
	frozen func() bool
	land   func()
	once   sync.Once
}

func (l *landAfterRead) Grants(ctx context.Context, c string, fn func(ledger.Grant) error) error {
	err := l.Ledger.Grants(ctx, c, fn)
	if err == nil && l.frozen() {
		l.once.Do(l.land)
	}
	return err
}

// worker is a settlement worker of campaign id on c whose ledger is l.
func (e *env) worker(c rueidisClient, l ledger.Ledger, consumer, id string) *settle.Worker {
	e.t.Helper()
	w, err := settle.New(settle.Config{Redis: c, Ledger: l, Consumer: consumer, Only: []string{id},
		Poll: 5 * time.Millisecond, PassTimeout: 2 * time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(e.t, err)
	return w
}

// requireFence checks that every shard of the campaign on c holds the
// ledger fence want ("" for none).
func requireFence(t *testing.T, c rueidisClient, id string, shards int, want string) {
	t.Helper()
	for k, keys := range redisstore.Default.Layout(id, shards) {
		v, err := c.Do(ctx, c.B().Hget().Key(keys.Meta).Field(redisstore.LedgerFence).Build()).ToString()
		if want == "" {
			require.Error(t, err, "shard %d", k)
			continue
		}
		require.NoError(t, err, "shard %d", k)
		require.Equal(t, want, v, "shard %d", k)
	}
}

func (e *env) grantCount(id string) int64 {
	e.t.Helper()
	tot, err := e.l.Totals(ctx, id)
	require.NoError(e.t, err)
	return tot.GrantCount
}

// TestRebuildFencesSettlement: a settlement worker read a batch of grants
// from the stream, then Redis lost everything, and the batch's commit
// was held until the rebuild had frozen the campaign and read the
// ledger. The rebuild planned from a ledger without those grants (their
// packets are quarantined: they may have been popped), so the batch must
// not commit after: the ledger refuses it (ErrFenced), the worker's pass
// fails, and nothing of it is paid. The rebuilt campaign carries the new
// fence in every shard, settles with it, and reconciles to the cent.
// Before the rebuild fenced the ledger, the batch committed: its users
// were paid for packets the rebuilt Redis gives nobody, and held no claim
// (a second grab paid them again).
func TestRebuildFencesSettlement(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		for _, shards := range []int{1, 4} {
			t.Run(lk.name+"/shards="+strconv.Itoa(shards), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, lk.dsn(t))
				c := e.create(200, shards)
				settled := grabAll(t, e.eng, c.ID, "s", 30)
				e.settleAll(e.r.Client, c.ID)
				requireFence(t, e.r.Client, c.ID, shards, "") // never rebuilt: fence 0, settles as ever
				require.EqualValues(t, 30, e.grantCount(c.ID))
				grabAll(t, e.eng, c.ID, "u", 20)
				quiet(t, e.eng)

				rep, landed, passErr := rebuildUnderHeldBatch(t, e, c.ID, func() { flushAll(t, e.r.Client) }, false)
				require.ErrorIs(t, landed, ledger.ErrFenced, "a batch read before the loss commits after the rebuild read the ledger")
				require.ErrorIs(t, passErr, ledger.ErrFenced)
				require.EqualValues(t, 30, e.grantCount(c.ID), "nothing of the held batch is paid")
				require.EqualValues(t, 30, rep.LedgerGrants)
				require.EqualValues(t, 30, rep.RestoredClaims)
				require.EqualValues(t, 1, rep.LedgerFence)
				require.False(t, rep.Funded)
				requireFence(t, e.r.Client, c.ID, shards, "1")

				rc := e.reconcile(e.r.Client, c.ID)
				require.True(t, rc.OK, "reconcile after the rebuild: %v", rc.Differences)
				for u, g := range settled {
					again, err := e.eng.Grab(ctx, c.ID, u)
					require.NoError(t, err)
					require.Equal(t, hongbao.Already, again.Outcome, u)
					require.Equal(t, g.Seq, again.Seq, u)
				}
				requireNewUsersGetThePool(t, e.eng, c.ID, settled, int(rep.RestoredPool))
				requireAudit(t, e.eng, c.ID)
				// Settled under the rebuild's fence, read from its meta.
				e.requireSettledOK(e.r.Client, e.eng, c.ID)
			})
		}
	}
}

// rebuildUnderHeldBatch starts a settlement pass of campaign id whose
// first batch is held before its commit, runs lose (what Redis loses),
// then rebuilds the campaign with the held batch let go once the rebuild
// has frozen the campaign and read the ledger's grants. It returns the
// report, the ledger's answer to the held batch and the pass's error.
func rebuildUnderHeldBatch(t *testing.T, e *env, id string, lose func(), force bool) (*rebuild.Report, error, error) {
	t.Helper()
	held := newHeldBatch(e.l)
	w := e.worker(e.r.Client, held, "held", id)
	passErr := make(chan error, 1)
	go func() { _, err := w.Pass(ctx); passErr <- err }()
	select {
	case <-held.entered:
	case err := <-passErr:
		t.Fatalf("the pass ended before its batch reached the ledger: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the worker never read a batch")
	}
	lose()
	root := redisstore.Default.CampaignKeys(id)
	var landed error
	rl := &landAfterRead{Ledger: e.l,
		frozen: func() bool {
			st, _ := e.r.Client.Do(ctx, e.r.Client.B().Hget().Key(root.Meta).Field("state").Build()).ToString()
			return st == "loading"
		},
		land: func() {
			close(held.release)
			landed = <-held.result
		}}
	rep, err := rebuild.Rebuild(ctx, rebuild.Config{Redis: e.r.Client, Ledger: rl, Force: force}, id)
	require.NoError(t, err)
	select {
	case err := <-passErr:
		return rep, landed, err
	case <-time.After(time.Minute):
		t.Fatal("the held pass never ended")
	}
	return nil, nil, nil
}

// TestRebuildFencedBatchSettlesAgain: the same held batch, but Redis kept
// the campaign (a forced rebuild): the rebuild restores the batch's
// grants from the surviving stream into the rebuilt one, the held batch
// is refused (ErrFenced), and the next pass settles those grants from
// the rebuilt stream under the new fence: each paid once, each user
// holding the same packet.
func TestRebuildFencedBatchSettlesAgain(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		t.Run(lk.name, func(t *testing.T) {
			t.Parallel()
			const shards = 2
			e := newEnv(t, lk.dsn(t))
			c := e.create(200, shards)
			settled := grabAll(t, e.eng, c.ID, "s", 30)
			e.settleAll(e.r.Client, c.ID)
			pending := grabAll(t, e.eng, c.ID, "u", 20)
			quiet(t, e.eng)
			rep, landed, passErr := rebuildUnderHeldBatch(t, e, c.ID, func() {}, true)
			require.ErrorIs(t, landed, ledger.ErrFenced)
			require.ErrorIs(t, passErr, ledger.ErrFenced)
			require.EqualValues(t, 30, e.grantCount(c.ID), "the held batch did not commit")
			require.EqualValues(t, 50, rep.RestoredClaims)
			require.EqualValues(t, 20, rep.ToSettle)
			require.EqualValues(t, 1, rep.LedgerFence)
			requireFence(t, e.r.Client, c.ID, shards, "1")

			e.settleAll(e.r.Client, c.ID)
			require.EqualValues(t, 50, e.grantCount(c.ID), "settled from the rebuilt stream, once")
			rc := e.reconcile(e.r.Client, c.ID)
			require.True(t, rc.OK, "reconcile: %v", rc.Differences)
			for u, g := range merge(settled, pending) {
				again, err := e.eng.Grab(ctx, c.ID, u)
				require.NoError(t, err)
				require.Equal(t, hongbao.Already, again.Outcome, u)
				require.Equal(t, g.Seq, again.Seq, u)
			}
			requireAudit(t, e.eng, c.ID)
			e.requireSettledOK(e.r.Client, e.eng, c.ID)
		})
	}
}

// TestRebuildFenceInFreshRedis: a campaign rebuilt once (forced, in its
// own Redis) settles under fence 1; then it is rebuilt into a fresh
// Redis, which raises the fence to 2. A worker still on the old Redis
// reads the grants granted there since and its fence 1: the ledger
// refuses them, so they are not paid beside the packets the rebuild
// quarantined for them. A worker on the fresh Redis reads fence 2 from
// the rebuilt meta and settles: the value the ledger holds is the one
// Redis holds.
func TestRebuildFenceInFreshRedis(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		t.Run(lk.name, func(t *testing.T) {
			t.Parallel()
			const shards = 2
			e := newEnv(t, lk.dsn(t))
			c := e.create(200, shards)
			early := grabAll(t, e.eng, c.ID, "s", 30)
			e.settleAll(e.r.Client, c.ID)
			requireFence(t, e.r.Client, c.ID, shards, "")
			mid := grabAll(t, e.eng, c.ID, "u", 10)
			quiet(t, e.eng)
			rep, err := e.rebuild(e.r.Client, c.ID, true)
			require.NoError(t, err)
			require.EqualValues(t, 1, rep.LedgerFence)
			require.EqualValues(t, 10, rep.ToSettle)
			requireFence(t, e.r.Client, c.ID, shards, "1")
			e.settleAll(e.r.Client, c.ID)
			require.EqualValues(t, 40, e.grantCount(c.ID), "settled under fence 1")

			grabAll(t, e.eng, c.ID, "x", 10)
			quiet(t, e.eng)
			fresh := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
			rep, err = e.rebuild(fresh.Client, c.ID, false)
			require.NoError(t, err)
			require.EqualValues(t, 2, rep.LedgerFence)
			require.EqualValues(t, 40, rep.LedgerGrants)
			requireFence(t, fresh.Client, c.ID, shards, "2")

			stale := e.worker(e.r.Client, e.l, "stale", c.ID)
			_, err = stale.Pass(ctx)
			require.ErrorIs(t, err, ledger.ErrFenced, "the old Redis's grants do not settle after the rebuild read the ledger")
			require.EqualValues(t, 40, e.grantCount(c.ID))

			eng := e.engineOn(fresh.Client)
			rc := e.reconcile(fresh.Client, c.ID)
			require.True(t, rc.OK, "reconcile after the rebuild: %v", rc.Differences)
			for u, g := range merge(early, mid) {
				again, err := eng.Grab(ctx, c.ID, u)
				require.NoError(t, err)
				require.Equal(t, hongbao.Already, again.Outcome, u)
				require.Equal(t, g.Seq, again.Seq, u)
			}
			requireAudit(t, eng, c.ID)
			e.requireSettledOK(fresh.Client, eng, c.ID)
		})
	}
}

// TestRebuildFundsBeforeFencing: a campaign nothing funded yet (a library
// user whose worker funds it with its first batch, and no batch settled
// before the loss) is funded by the rebuild from its terms, so the
// ledger has the row the fence lives in; it then settles to the cent.
func TestRebuildFundsBeforeFencing(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		t.Run(lk.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, lk.dsn(t))
			c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
			require.NoError(t, err)
			grabAll(t, e.eng, c.ID, "u", 10)
			quiet(t, e.eng)
			flushAll(t, e.r.Client)
			rep, err := e.rebuild(e.r.Client, c.ID, false)
			require.NoError(t, err)
			require.True(t, rep.Funded)
			require.EqualValues(t, 1, rep.LedgerFence)
			tot, err := e.l.Totals(ctx, c.ID)
			require.NoError(t, err)
			require.EqualValues(t, 10_000, tot.Funded)
			require.Equal(t, hongbao.DefaultFunding, tot.Funding)
			requireFence(t, e.r.Client, c.ID, 1, "1")
			requireAudit(t, e.eng, c.ID)
			e.requireSettledOK(e.r.Client, e.eng, c.ID)
		})
	}
}
