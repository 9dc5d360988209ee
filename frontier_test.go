package hongbao_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestFrontier: under the pop frontier, concurrent grabs through two
// engines (sharing one ledger) hand out every packet exactly once, each
// from a block the ledger recorded before it was popped, and answer
// SOLD_OUT only once every packet is granted, never while only sealed
// packets remain; the ledger holds about the blocks the grants needed.
// An engine without a block recorder meets a sealed pool with "busy",
// never SOLD_OUT.
func TestFrontier(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			r := testenv.SharedRedis(t)
			var engs []*hongbao.Engine
			for range 2 {
				eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, BlockSize: 7, MaxBatch: 8})
				require.NoError(t, err)
				engs = append(engs, eng)
			}
			const count = 100
			c := create(t, engs[0], hongbao.Spec{Total: count * 10, Count: count, Shards: shards})

			bare, err := hongbao.New(hongbao.Config{Redis: r.Client})
			require.NoError(t, err)
			_, err = bare.Grab(ctx, c.ID, "bare")
			require.ErrorIs(t, err, hongbao.ErrBusy, "nothing opened yet, and this engine cannot open: busy, not sold out")

			// Half the users are homed on shard 0, which holds a third
			// of the packets: the others' users cannot take all of
			// theirs, so packets must move to shard 0 for every one to
			// be granted, whatever the timing.
			users := skewedUsers(16*8, shards)
			var mu sync.Mutex
			got := map[int64]string{}
			soldOut := 0
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 8 {
						u := users[w*8+i]
						g, err := engs[(w+i)%2].Grab(ctx, c.ID, u)
						if !assertNoError(t, err, u) {
							return
						}
						mu.Lock()
						switch g.Outcome {
						case hongbao.Granted:
							if prev, dup := got[g.Seq]; dup {
								t.Errorf("packet %d granted to %s and %s", g.Seq, prev, u)
							}
							got[g.Seq] = u
						case hongbao.SoldOut:
							soldOut++
						default:
							t.Errorf("%s: outcome %v", u, g.Outcome)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			require.Len(t, got, count, "every packet granted once")
			require.Equal(t, 16*8-count, soldOut)

			opened := map[int64]bool{}
			blocks := 0
			require.NoError(t, l.Blocks(ctx, c.ID, func(b ledger.Block) error {
				blocks++
				for _, s := range b.Seqs {
					opened[s] = true
				}
				return nil
			}))
			for seq, u := range got {
				require.True(t, opened[seq], "packet %d (to %s) was popped from a block the ledger does not know", seq, u)
			}
			require.LessOrEqual(t, blocks, count/7+2*shards+8, "a block per 7 packets, give or take transfers")
			if shards > 1 {
				require.Positive(t, engs[0].Stats().Transfers+engs[1].Stats().Transfers, "shards ran dry and borrowed")
			}
			a, err := engs[1].Audit(ctx, c.ID)
			require.NoError(t, err)
			require.True(t, a.OK(), "%v", a.Problems)
		})
	}
}

// skewedUsers names n users, half of them homed on shard 0 of shards
// (all of them when there is one shard).
func skewedUsers(n, shards int) []string {
	var users []string
	home0 := 0
	for i := 0; len(users) < n; i++ {
		u := "u" + strconv.Itoa(i)
		if shards == 1 {
			users = append(users, u)
			continue
		}
		if hongbao.HomeShard(u, shards) == 0 {
			if home0 >= n/2 {
				continue
			}
			home0++
		} else if len(users)-home0 >= n-n/2 {
			continue
		}
		users = append(users, u)
	}
	return users
}

// assertNoError reports err from a goroutine without stopping the test.
func assertNoError(t *testing.T, err error, what string) bool {
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	return true
}

// TestFrontierOpensAhead: the first grab opens the first block (the pool
// starts sealed); once grabs leave less than a quarter block opened,
// the next block opens in the background, before any grab needs it, and
// no further: at most one block ahead.
func TestFrontierOpensAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, BlockSize: 8})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 40})
	blocks := func() int {
		n := 0
		require.NoError(t, l.Blocks(ctx, c.ID, func(ledger.Block) error { n++; return nil }))
		return n
	}
	sealed := func() string {
		v, err := r.Client.Do(ctx, r.Client.B().Hget().Key("hb:{c:"+c.ID+"}:meta").Field("sealed").Build()).ToString()
		require.NoError(t, err)
		return v
	}
	require.Zero(t, blocks(), "nothing opens before a grab")
	require.Equal(t, "40", sealed())
	for i := range 6 {
		g, err := eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	require.Equal(t, 1, blocks(), "6 of 8 granted: 2 left opened, no hint yet")
	g, err := eng.Grab(ctx, c.ID, "u6")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	require.Eventually(t, func() bool { return blocks() == 2 && sealed() == "24" }, 10*time.Second, 5*time.Millisecond,
		"one left opened: the next block opens ahead of need")
	for i := 7; i < 12; i++ {
		_, err := eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	require.Equal(t, 2, blocks(), "4 of 9 left opened: nothing more")
}

// TestFrontierStoppedBetweenSteps: opening a block is a peek, a ledger
// write and a move of the frontier. Stopped after the ledger write, the
// block stays sealed (nothing popped that the ledger does not know) and
// the next open records it again under the same id (one record) and
// opens it. An open whose block is no longer the next one (another
// engine opened it) writes nothing.
func TestFrontierStoppedBetweenSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, BlockSize: 5})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 20})
	st, keys := redisstore.New(r.Client), redisstore.Default.CampaignKeys(c.ID)

	// Recorded, then the engine died.
	b, err := st.PeekBlock(ctx, keys, 5, 1)
	require.NoError(t, err)
	require.Len(t, b.Seqs, 5)
	require.NoError(t, l.OpenBlock(ctx, c.ID, ledger.Block{ID: b.Digest, Seqs: b.Seqs}))
	stale, err := st.PeekBlock(ctx, keys, 5, 1)
	require.NoError(t, err)
	require.Equal(t, b.Digest, stale.Digest, "still sealed: the same next block")

	g, err := eng.Grab(ctx, c.ID, "ann")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	require.Contains(t, b.Seqs, g.Seq, "the recorded block was opened")
	var ids []string
	require.NoError(t, l.Blocks(ctx, c.ID, func(b ledger.Block) error { ids = append(ids, b.ID); return nil }))
	require.Equal(t, []string{b.Digest}, ids, "recorded once")

	opened, err := st.OpenBlock(ctx, keys, stale)
	require.NoError(t, err)
	require.False(t, opened, "the block is open already: nothing written")
	sealed, err := r.Client.Do(ctx, r.Client.B().Hget().Key(keys.Meta).Field("sealed").Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "15", sealed)
}

// flakyBlocks is a ledger whose OpenBlock fails with err while it is set.
type flakyBlocks struct {
	ledger.Ledger
	mu  sync.Mutex
	err error
}

func (f *flakyBlocks) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Ledger.OpenBlock(ctx, campaign, b)
}

func (f *flakyBlocks) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// TestFrontierLedgerDown: a grab that needs the next block while the
// ledger cannot record it is answered ErrLedgerUnavailable, an
// ErrUnavailable (503 unavailable with Retry-After over HTTP: retry
// later), never ErrBusy (which would blame Redis), grants nothing, and a
// retry once the ledger is back is granted from the recorded block. A
// refusal of the ledger's own (a conflicting block) stays what it is: a
// fault, not a pause.
func TestFrontierLedgerDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	fl := &flakyBlocks{Ledger: l}
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: fl, BlockSize: 5})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 20})

	fl.fail(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	_, err = eng.Grab(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrUnavailable)
	require.ErrorIs(t, err, hongbao.ErrLedgerUnavailable)
	require.NotErrorIs(t, err, hongbao.ErrBusy, "the ledger is down, Redis is not busy")
	requireOnePrefix(t, err)
	_, err = eng.Held(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrNoGrant, "nothing granted while the block could not be recorded")

	fl.fail(&ledger.ConflictError{Entry: "block"})
	_, err = eng.Grab(ctx, c.ID, "ann")
	require.ErrorIs(t, err, ledger.ErrConflict)
	require.NotErrorIs(t, err, hongbao.ErrUnavailable)
	require.NotErrorIs(t, err, hongbao.ErrLedgerUnavailable)

	fl.fail(nil)
	g, err := eng.Grab(ctx, c.ID, "ann")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	var blocks int
	require.NoError(t, l.Blocks(ctx, c.ID, func(b ledger.Block) error {
		blocks++
		require.Contains(t, b.Seqs, g.Seq, "granted from the block the ledger recorded")
		return nil
	}))
	require.Equal(t, 1, blocks)
}

// packetsDown is a ledger whose WritePackets fails with err.
type packetsDown struct {
	ledger.Ledger
	err error
}

func (p *packetsDown) WritePackets(context.Context, string, []int64) error { return p.err }

// TestCreateLedgerDown: a create while the ledger cannot record the
// packets is ErrLedgerUnavailable (503 unavailable over HTTP: nothing
// was created, retry), not an internal error; the campaign never went
// live. A refusal of the ledger's own stays the ledger's.
func TestCreateLedgerDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	down := &packetsDown{Ledger: l, err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: down, Namespace: "cld" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	require.NoError(t, err)
	_, err = eng.Create(ctx, hongbao.Spec{ID: "down-" + strconv.FormatInt(time.Now().UnixNano(), 36), Total: 1000, Count: 20})
	require.ErrorIs(t, err, hongbao.ErrLedgerUnavailable)
	require.ErrorIs(t, err, hongbao.ErrUnavailable)
	requireOnePrefix(t, err)
	ids, err := eng.Campaigns(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "nothing went live")

	down.err = &ledger.ConflictError{Entry: "packets"}
	_, err = eng.Create(ctx, hongbao.Spec{Total: 1000, Count: 20})
	require.ErrorIs(t, err, ledger.ErrConflict)
	require.NotErrorIs(t, err, hongbao.ErrUnavailable)
}
