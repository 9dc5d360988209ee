package hongbao_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/split"
)

// faultClient passes every command to its Redis except the one a fault
// picks: the nth command sent (a command of a DoMulti counts as one), or
// every command once armed is set. A fault refuses the command (nothing
// ran) or, when lost is set, runs it and loses its reply. Either way the
// caller gets an error, as from a timeout, a dropped connection or a node
// failing over.
type faultClient struct {
	rueidis.Client

	mu    sync.Mutex
	n     int  // commands seen since the last arm
	at    int  // fail the at-th command; 0: none
	lost  bool // the failed command runs, its reply is lost
	after func(cmd []string) bool
	dead  bool // after matched: every later command fails
	hit   bool
}

// failAt arms the fault at the nth command from now.
func (f *faultClient) failAt(n int, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.at, f.lost, f.hit, f.after, f.dead = 0, n, lost, false, nil, false
}

// dieAfter runs commands until one that match accepts, then fails every
// command from the next on: a process dying right after that step.
func (f *faultClient) dieAfter(match func(cmd []string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.at, f.hit, f.after, f.dead = 0, 0, false, match, false
}

// heal disarms the fault; struck still says whether it struck.
func (f *faultClient) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at, f.after, f.dead = 0, nil, false
}

func (f *faultClient) struck() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hit
}

// next says whether cmd fails, and whether it runs first.
func (f *faultClient) next(cmd []string) (fail, run bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	switch {
	case f.dead:
		return true, false
	case f.after != nil:
		f.dead = f.after(cmd)
		f.hit = f.hit || f.dead
		return false, true
	case f.n == f.at:
		f.hit = true
		return true, f.lost
	}
	return false, true
}

// failed is an error result made by the client itself: a call on a
// cancelled context, which sends nothing.
func (f *faultClient) failed(ctx context.Context) rueidis.RedisResult {
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	return f.Client.Do(cctx, f.Client.B().Ping().Build())
}

func (f *faultClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	fail, run := f.next(cmd.Commands())
	if !fail {
		return f.Client.Do(ctx, cmd)
	}
	if run {
		_ = f.Client.Do(ctx, cmd).Error()
	}
	return f.failed(ctx)
}

func (f *faultClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(cmds))
	for i, cmd := range cmds {
		out[i] = f.Do(ctx, cmd)
	}
	return out
}

// registry reads the score of id in the registry of its kind.
func registry(t *testing.T, c rueidis.Client, discount bool, id string) (score int64, ok bool) {
	t.Helper()
	key := redisstore.Default.Index(redisstore.RedPacket)
	if discount {
		key = redisstore.Default.Index(redisstore.Discount)
	}
	s, err := c.Do(context.Background(), c.B().Zscore().Key(key).Member(id).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0, false
	}
	require.NoError(t, err)
	return int64(s), true
}

// createKind is one kind of create under test: red packets or discounts,
// one shard or several.
type createKind struct {
	name     string
	discount bool
	shards   int
}

var createKinds = []createKind{
	{"packets", false, 1}, {"packets-sharded", false, 3},
	{"discounts", true, 1}, {"discounts-sharded", true, 2},
}

// create runs the create of kind k with id; its answer and the campaign's
// close time, when it is live.
func (k createKind) create(ctx context.Context, eng *hongbao.Engine, id string) error {
	if k.discount {
		_, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: id, Budget: 1000, Quota: 10, Shards: k.shards, Seed: seed(7)})
		return err
	}
	_, err := eng.Create(ctx, hongbao.Spec{ID: id, Total: 1000, Count: 10, Split: split.Fixed, Shards: k.shards, Seed: seed(7)})
	return err
}

// live says whether campaign id is past loading (it can be grabbed or
// reserved, or could have been), and its close time.
func (k createKind) live(t *testing.T, ctx context.Context, eng *hongbao.Engine, id string) (bool, int64) {
	t.Helper()
	var closes time.Time
	var err error
	if k.discount {
		var st *hongbao.DiscountStatus
		if st, err = eng.Discounts().Status(ctx, id); err == nil {
			closes = st.ClosesAt
		}
	} else {
		var st *hongbao.Status
		if st, err = eng.Status(ctx, id); err == nil {
			closes = st.ClosesAt
		}
	}
	if errors.Is(err, hongbao.ErrCampaignNotFound) {
		return false, 0
	}
	require.NoError(t, err)
	return true, closes.UnixMilli()
}

// TestCreateRegistersWhateverStepFails: a create stopped at any of its
// steps, by a command refused or a reply lost, never leaves a campaign
// that can be grabbed (or reserved) outside the registry the scheduler
// walks; a create run again with the same id leaves it live and
// registered with its close time. Before, the registration was a step
// after the activation: a failure there left the campaign live and
// unknown to settlement, and the create run again answered "exists"
// without registering it.
func TestCreateRegistersWhateverStepFails(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	fc := &faultClient{Client: r.Client}
	eng, err := hongbao.New(hongbao.Config{Redis: fc})
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range createKinds {
		for _, lost := range []bool{false, true} {
			t.Run(k.name+"/lost="+strconv.FormatBool(lost), func(t *testing.T) {
				for n := 1; ; n++ {
					require.Less(t, n, 200, "a create of a few commands")
					id := testenv.UniqueID(t)
					fc.failAt(n, lost)
					err := k.create(ctx, eng, id)
					fc.heal()
					if !fc.struck() {
						require.NoError(t, err, "no fault: the create went through")
						requireRegistered(t, ctx, r.Client, eng, k, id)
						t.Logf("a fault at each of the create's %d commands", n-1)
						return
					}
					if live, _ := k.live(t, ctx, eng, id); live {
						_, ok := registry(t, r.Client, k.discount, id)
						require.True(t, ok, "fault at command %d (create answered %v): the campaign is live but not registered", n, err)
					}
					err = k.create(ctx, eng, id)
					if err != nil {
						require.ErrorIs(t, err, hongbao.ErrCampaignExists, "the create run again after a fault at command %d", n)
					}
					requireRegistered(t, ctx, r.Client, eng, k, id)
				}
			})
		}
	}
}

// requireRegistered: campaign id is live and registered by its close time.
func requireRegistered(t *testing.T, ctx context.Context, c rueidis.Client, eng *hongbao.Engine, k createKind, id string) {
	t.Helper()
	live, closes := k.live(t, ctx, eng, id)
	require.True(t, live)
	score, ok := registry(t, c, k.discount, id)
	require.True(t, ok, "the live campaign is registered")
	require.Equal(t, closes, score, "registered by its close time")
}

// TestReplayedCreateRegisters: a create that finds its campaign live
// registers it again, with its close time: a campaign whose registration
// was lost (an earlier version registered after activation; an operator's
// ZREM) is settled once the create is replayed, as an Idempotency-Key
// retry does. A settled campaign is not registered again.
func TestReplayedCreateRegisters(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	c := r.Client
	ctx := context.Background()
	for _, k := range createKinds {
		t.Run(k.name, func(t *testing.T) {
			id := testenv.UniqueID(t)
			require.NoError(t, k.create(ctx, eng, id))
			key := redisstore.Default.Index(redisstore.RedPacket)
			if k.discount {
				key = redisstore.Default.Index(redisstore.Discount)
			}
			require.NoError(t, c.Do(ctx, c.B().Zrem().Key(key).Member(id).Build()).Error())
			require.ErrorIs(t, k.create(ctx, eng, id), hongbao.ErrCampaignExists)
			requireRegistered(t, ctx, c, eng, k, id)
		})
	}
}

// TestReplayOfSettledCreateStaysOut: a create replayed after the
// campaign settled and left the registry leaves it out.
func TestReplayOfSettledCreateStaysOut(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	k := createKinds[0]
	id := testenv.UniqueID(t)
	require.NoError(t, k.create(ctx, eng, id))
	_, err := eng.CloseCampaign(ctx, id)
	require.NoError(t, err)
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: sqliteLedger(t), Consumer: "replay", Only: []string{id}, Logger: quiet()})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	_, ok := registry(t, r.Client, false, id)
	require.False(t, ok, "settled and retired")
	var exists *hongbao.ExistsError
	require.ErrorAs(t, k.create(ctx, eng, id), &exists)
	require.Equal(t, hongbao.StateSettled, exists.State)
	_, ok = registry(t, r.Client, false, id)
	require.False(t, ok, "a settled campaign is not registered again")
}

// TestAbandonedCreateBlocksNothing: a create that dies right after it
// registered its campaign leaves it registered and loading. The
// settlement worker and the discount reaper pass over it and settle the
// others; it cannot be grabbed or reserved; a create run again finishes
// it.
func TestAbandonedCreateBlocksNothing(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	fc := &faultClient{Client: r.Client}
	eng, err := hongbao.New(hongbao.Config{Redis: fc})
	require.NoError(t, err)
	ctx := context.Background()
	for _, k := range createKinds {
		t.Run(k.name, func(t *testing.T) {
			index := redisstore.Default.Index(redisstore.RedPacket)
			if k.discount {
				index = redisstore.Default.Index(redisstore.Discount)
			}
			abandoned, other := testenv.UniqueID(t), testenv.UniqueID(t)
			fc.dieAfter(func(cmd []string) bool { return len(cmd) > 1 && cmd[0] == "ZADD" && cmd[1] == index })
			require.Error(t, k.create(ctx, eng, abandoned))
			require.True(t, fc.struck())
			fc.heal()
			_, ok := registry(t, r.Client, k.discount, abandoned)
			require.True(t, ok, "registered before it went live")
			live, _ := k.live(t, ctx, eng, abandoned)
			require.False(t, live, "still loading")
			if k.discount {
				res, err := eng.Discounts().Reserve(ctx, abandoned, "alice", "o-1", 500)
				require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "%+v", res)
				_, err = eng.Discounts().ReapAll(ctx)
				require.NoError(t, err, "the reaper passes over a loading campaign")
			} else {
				_, err := eng.Grab(ctx, abandoned, "alice")
				require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
			}

			// Another campaign, closed, settles beside it.
			require.NoError(t, k.create(ctx, eng, other))
			if k.discount {
				_, err = eng.Discounts().CloseCampaign(ctx, other)
			} else {
				_, err = eng.CloseCampaign(ctx, other)
			}
			require.NoError(t, err)
			w, err := settle.New(settle.Config{Redis: r.Client, Ledger: sqliteLedger(t), Consumer: "abandoned",
				Only: []string{abandoned, other}, Logger: quiet()})
			require.NoError(t, err)
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			p, err := w.Drain(dctx)
			require.NoError(t, err, "the drain ends with a loading campaign registered")
			require.Equal(t, 1, p.Open, "the loading one is still open")
			_, ok = registry(t, r.Client, k.discount, other)
			require.False(t, ok, "the other campaign settled and left the registry")
			require.EqualValues(t, 1, w.Stats().Refunds)

			// A create run again finishes the abandoned one.
			require.NoError(t, k.create(ctx, eng, abandoned))
			requireRegistered(t, ctx, r.Client, eng, k, abandoned)
		})
	}
}

// TestRefusedWindowLeavesNothingRegistered: a create whose close time is
// already past (by the Redis clock) is refused at its activation; it
// registered the campaign before, and takes it out again: a refused create
// leaves nothing for the scheduler to walk.
func TestRefusedWindowLeavesNothingRegistered(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	opens, closes := time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	for _, k := range createKinds {
		t.Run(k.name, func(t *testing.T) {
			id := testenv.UniqueID(t)
			var err error
			if k.discount {
				_, err = eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: id, Budget: 1000, Quota: 10, Shards: k.shards, OpensAt: opens, ClosesAt: closes})
			} else {
				_, err = eng.Create(ctx, hongbao.Spec{ID: id, Total: 1000, Count: 10, Shards: k.shards, OpensAt: opens, ClosesAt: closes})
			}
			require.ErrorIs(t, err, hongbao.ErrInvalidSpec)
			_, ok := registry(t, r.Client, k.discount, id)
			require.False(t, ok, "refused: not registered")
		})
	}
}
