package rebuild_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/ledgertest"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/rebuild"
	"github.com/hongbao/hongbao/settle"
)

var ctx = context.Background()

// ledgers are the two ledgers every scenario runs against.
var ledgers = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ledger.db") }},
	{"postgres", func(t *testing.T) string { return ledgertest.PostgresDSN(t) }},
}

// env is a campaign's world: a private Redis (a test may flush it), a
// ledger, and an engine that records the packets and terms in it.
type env struct {
	t   *testing.T
	r   *testenv.Redis
	l   ledger.Ledger
	eng *hongbao.Engine
}

func newEnv(t *testing.T, dsn string) *env {
	t.Helper()
	l, err := open.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	e := &env{t: t, r: testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}}), l: l}
	e.eng = e.engineOn(e.r.Client)
	return e
}

// rueidisClient is the client type, short.
type rueidisClient = rueidis.Client

// testBlock is the engines' block size: small, so a campaign of a few
// hundred packets opens several blocks and a rebuild puts the packets of
// the blocks never opened back in the pool.
const testBlock = 10

// engineOn is an engine on c that records packets, terms and opened
// blocks in the ledger.
func (e *env) engineOn(c rueidisClient) *hongbao.Engine {
	e.t.Helper()
	eng, err := hongbao.New(hongbao.Config{Redis: c, Packets: e.l, BlockSize: testBlock})
	require.NoError(e.t, err)
	return eng
}

// create makes a campaign of count packets and funds it, as serve does.
func (e *env) create(count, shards int) *hongbao.Campaign {
	e.t.Helper()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(e.t), Total: int64(count) * 100, Count: count, Shards: shards})
	require.NoError(e.t, err)
	require.NoError(e.t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}))
	return c
}

// grabAll has users prefix0..prefix<n-1> grab once each and returns what
// each was told.
func grabAll(t *testing.T, eng *hongbao.Engine, id, prefix string, n int) map[string]hongbao.Grant {
	t.Helper()
	out := map[string]hongbao.Grant{}
	for i := range n {
		u := prefix + strconv.Itoa(i)
		g, err := eng.Grab(ctx, id, u)
		require.NoError(t, err, u)
		out[u] = g
	}
	return out
}

// settleAll settles every grant of the campaign so far (the campaign
// stays open unless it is closed).
func (e *env) settleAll(c rueidisClient, id string) {
	e.t.Helper()
	w, err := settle.New(settle.Config{Redis: c, Ledger: e.l, Consumer: "w", Only: []string{id},
		Poll: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(e.t, err)
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(e.t, err)
}

func (e *env) reconcile(c rueidisClient, id string) *settle.Report {
	e.t.Helper()
	rep, err := settle.Reconcile(ctx, c, "", e.l, id)
	require.NoError(e.t, err)
	return rep
}

func (e *env) rebuild(c rueidisClient, id string, force bool) (*rebuild.Report, error) {
	return rebuild.Rebuild(ctx, rebuild.Config{Redis: c, Ledger: e.l, Force: force}, id)
}

// quiet waits until no engine of the test has an open ahead of need in
// flight, so the blocks in the ledger are all a rebuild will find.
func quiet(t *testing.T, engs ...*hongbao.Engine) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, e := range engs {
			if e.Stats().OpeningAhead > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
}

func flushAll(t *testing.T, c rueidisClient) {
	t.Helper()
	require.NoError(t, c.Do(ctx, c.B().Flushall().Build()).Error())
}

// requireAudit checks the campaign's contents: one packet per user, each
// packet once, conservation to the cent.
func requireAudit(t *testing.T, eng *hongbao.Engine, id string) *hongbao.Audit {
	t.Helper()
	a, err := eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	return a
}

// requireSettledOK closes, settles and reconciles the campaign.
func (e *env) requireSettledOK(c rueidisClient, eng *hongbao.Engine, id string) *settle.Report {
	e.t.Helper()
	_, err := eng.CloseCampaign(ctx, id)
	require.NoError(e.t, err)
	e.settleAll(c, id)
	rep := e.reconcile(c, id)
	require.True(e.t, rep.OK, "reconcile after settling: %v", rep.Differences)
	require.Equal(e.t, "settled", rep.State)
	require.Zero(e.t, rep.EscrowCents)
	return rep
}

// TestRebuildAfterFlush: settlement caught up, then Redis lost
// everything. The rebuild restores every claim from the ledger and the
// packets of the blocks never opened to the pool (those of opened blocks
// nobody holds are quarantined); reconcile is ok; a user who held a
// packet gets ALREADY with the same one; new users get packets from the
// restored pool and from nowhere else; the campaign settles to the cent.
func TestRebuildAfterFlush(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		for _, shards := range []int{1, 4} {
			t.Run(lk.name+"/shards="+strconv.Itoa(shards), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, lk.dsn(t))
				c := e.create(200, shards)
				before := grabAll(t, e.eng, c.ID, "u", 120)
				e.settleAll(e.r.Client, c.ID)
				quiet(t, e.eng)
				flushAll(t, e.r.Client)

				_, err := e.eng.Grab(ctx, c.ID, "u0")
				require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "Redis lost it")
				rep, err := e.rebuild(e.r.Client, c.ID, false)
				require.NoError(t, err)
				require.EqualValues(t, 120, rep.RestoredClaims)
				// The engine opened a block ahead of need on a shard that ran
				// low: its packets may have been popped for all the rebuild
				// knows, and are quarantined. The blocks never opened go back.
				q, _ := openedUnplaced(t, e, c.ID, before)
				require.Equal(t, q, rep.Quarantined)
				require.LessOrEqual(t, q, int64(2*shards*testBlock))
				require.EqualValues(t, 80-q, rep.RestoredPool)
				require.Zero(t, rep.Unrecoverable)
				require.Zero(t, rep.ToSettle)
				require.Zero(t, rep.ShardsSurvived)
				require.Equal(t, "open", rep.State)
				require.Equal(t, shards, rep.Shards)
				require.Contains(t, strings.Join(rep.Problems, "\n"), "gone")

				_, err = e.rebuild(e.r.Client, c.ID, false)
				require.ErrorIs(t, err, rebuild.ErrHealthy, "rebuilt keys look healthy")
				rc := e.reconcile(e.r.Client, c.ID)
				require.True(t, rc.OK, "reconcile after the rebuild: %v", rc.Differences)

				for u, g := range before {
					again, err := e.eng.Grab(ctx, c.ID, u)
					require.NoError(t, err)
					require.Equal(t, hongbao.Already, again.Outcome, u)
					require.Equal(t, g.Seq, again.Seq, u)
				}
				requireNewUsersGetThePool(t, e.eng, c.ID, before, 80-int(q))
				requireAudit(t, e.eng, c.ID)
				e.requireSettledOK(e.r.Client, e.eng, c.ID)
			})
		}
	}
}

// requireNewUsersGetThePool: new users get exactly the pool's packets,
// none held before, each once, then SOLD_OUT.
func requireNewUsersGetThePool(t *testing.T, eng *hongbao.Engine, id string, before map[string]hongbao.Grant, pool int) {
	t.Helper()
	held := map[int64]bool{}
	for _, g := range before {
		held[g.Seq] = true
	}
	after := grabAll(t, eng, id, "v", pool+10)
	granted := 0
	for u, g := range after {
		switch g.Outcome {
		case hongbao.Granted:
			granted++
			require.False(t, held[g.Seq], "%s got packet %d, which was held before", u, g.Seq)
			held[g.Seq] = true
		default:
			require.Equal(t, hongbao.SoldOut, g.Outcome, u)
		}
	}
	require.Equal(t, pool, granted)
}
