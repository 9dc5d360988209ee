package hongbao_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/split"
)

// creators is how many creates of one id race in the tests below.
const creators = 6

// createRace is one race of creates of the same id: the engines they run
// on (one shared by every creator, or one each with its own client and its
// own opening of the ledger file, as separate processes would have).
type createRace struct {
	engines []*hongbao.Engine
	ledger  ledger.Ledger // the first engine's
}

// newCreateRace starts the engines of a race on r, all with a SQLite
// ledger in the same file as Config.Packets.
func newCreateRace(t *testing.T, r *testenv.Redis, separate bool) *createRace {
	t.Helper()
	path := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
	cr := &createRace{}
	for i := range creators {
		if i > 0 && !separate {
			cr.engines = append(cr.engines, cr.engines[0])
			continue
		}
		l, err := open.Open(context.Background(), path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		client := r.Client
		if i > 0 {
			client = testenv.Client(t, r.Addr)
		}
		eng, err := hongbao.New(hongbao.Config{Redis: client, Packets: l, Logger: quiet()})
		require.NoError(t, err)
		cr.engines = append(cr.engines, eng)
		if i == 0 {
			cr.ledger = l
		}
	}
	return cr
}

// run calls create once per creator, all at once, and returns their
// errors and the result of the one that created the campaign.
func run[C any](t *testing.T, cr *createRace, create func(context.Context, *hongbao.Engine) (C, error)) (created C, errs []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := make(chan struct{})
	errs = make([]error, creators)
	results := make([]C, creators)
	var wg sync.WaitGroup
	for i, eng := range cr.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = create(ctx, eng)
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i, err := range errs {
		if err == nil {
			winners++
			created = results[i]
		}
	}
	require.Equal(t, 1, winners, "exactly one create succeeds: %v", errs)
	return created, errs
}

// requireOthersExist: every create but the one that succeeded is an
// *ExistsError with the state of a live campaign, never an interrupted
// load.
func requireOthersExist(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err == nil {
			continue
		}
		require.NotErrorIs(t, err, hongbao.ErrLoadInterrupted)
		var exists *hongbao.ExistsError
		require.ErrorAs(t, err, &exists, "%v", err)
		require.ErrorIs(t, err, hongbao.ErrCampaignExists)
		require.Contains(t, []hongbao.State{hongbao.StateScheduled, hongbao.StateOpen}, exists.State, "%v", err)
	}
}

// TestConcurrentCreate: creators create the same red packet campaign at
// once, as replicas of a host's service would, on one engine or on one
// engine each, with or without a seed, on one shard or four: exactly one
// creates it, the others get ErrCampaignExists with its state, and the
// campaign is whole: its audit is clean, the ledger recorded the packets
// it holds (every packet grabbed is the ledger's packet of its seq) and
// the terms with its seed.
func TestConcurrentCreate(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 4} {
		for _, seeded := range []bool{false, true} {
			for _, separate := range []bool{false, true} {
				t.Run(fmt.Sprintf("shards=%d/seed=%v/engines=%v", shards, seeded, separate), func(t *testing.T) {
					t.Parallel()
					cr := newCreateRace(t, r, separate)
					spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 20_000, Count: 200, Shards: shards,
						ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
					if seeded {
						spec.Seed = seed(42)
					}
					c, errs := run(t, cr, func(ctx context.Context, eng *hongbao.Engine) (*hongbao.Campaign, error) {
						return eng.Create(ctx, spec)
					})
					requireOthersExist(t, errs)
					requireWholeCampaign(t, cr, spec, c)
				})
			}
		}
	}
}

// requireWholeCampaign checks campaign c, which spec created: its status,
// its audit, the terms and packets the ledger recorded, and every packet,
// grabbed once each.
func requireWholeCampaign(t *testing.T, cr *createRace, spec hongbao.Spec, c *hongbao.Campaign) {
	t.Helper()
	ctx := context.Background()
	eng := cr.engines[0]
	st, err := eng.Status(ctx, spec.ID)
	require.NoError(t, err)
	require.Equal(t, c.Seed, st.Seed)
	require.Equal(t, spec.Count, st.Count)
	require.Equal(t, spec.Shards, st.Shards)
	require.EqualValues(t, spec.Count, st.RemainingCount)
	if spec.Seed != nil {
		require.Equal(t, *spec.Seed, st.Seed)
	}
	a, err := eng.Audit(ctx, spec.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.Equal(t, spec.Total, a.PoolCents)

	terms, err := cr.ledger.Terms(ctx, spec.ID)
	require.NoError(t, err)
	require.Equal(t, st.Seed, terms.Seed, "the ledger recorded the seed of the campaign that went live")
	sp, err := split.Spec{Total: spec.Total, Count: spec.Count}.Normalize()
	require.NoError(t, err)
	want, err := split.Split(sp, st.Seed)
	require.NoError(t, err)
	recorded := map[int64]int64{}
	require.NoError(t, cr.ledger.Packets(ctx, spec.ID, func(p ledger.Packet) error {
		recorded[p.Seq] = p.Cents
		return nil
	}))
	require.Len(t, recorded, spec.Count)
	for i, cents := range want {
		require.Equal(t, cents, recorded[int64(i+1)], "packet %d", i+1)
	}
	for i := range spec.Count {
		g, err := eng.Grab(ctx, spec.ID, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		require.Equal(t, recorded[g.Seq], g.Cents, "packet %d is the ledger's", g.Seq)
	}
}

// TestConcurrentDiscountCreate: TestConcurrentCreate for a discount
// campaign.
func TestConcurrentDiscountCreate(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 4} {
		for _, seeded := range []bool{false, true} {
			for _, separate := range []bool{false, true} {
				t.Run(fmt.Sprintf("shards=%d/seed=%v/engines=%v", shards, seeded, separate), func(t *testing.T) {
					t.Parallel()
					cr := newCreateRace(t, r, separate)
					spec := hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 50_000, Quota: 400, Max: 500, Shards: shards,
						ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
					if seeded {
						spec.Seed = seed(42)
					}
					d, errs := run(t, cr, func(ctx context.Context, eng *hongbao.Engine) (*hongbao.Discount, error) {
						return eng.Discounts().Create(ctx, spec)
					})
					requireOthersExist(t, errs)
					ctx := context.Background()
					st, err := cr.engines[0].Discounts().Status(ctx, spec.ID)
					require.NoError(t, err)
					require.Equal(t, d.Seed, st.Seed)
					require.Equal(t, shards, st.Shards)
					require.EqualValues(t, spec.Quota, st.RemainingCount)
					require.Equal(t, spec.Budget, st.RemainingCents)
					a := requireAudit(t, cr.engines[0], spec.ID)
					require.Equal(t, spec.Budget, a.PoolCents+a.CompensationCents)
				})
			}
		}
	}
}

// deadLoad begins the load of campaign spec.ID as a create that died after
// its first chunk would leave it: the root (and, for a sharded campaign,
// shard 1) begun under a hold of hold, the first chunk of the root's share
// staged, and the packets of seed recorded in the ledger, but no terms. It
// returns until when the chunk's renewal holds the campaign (Redis clock,
// ms).
func deadLoad(t *testing.T, r *testenv.Redis, l ledger.Ledger, spec hongbao.Spec, seed uint64, hold time.Duration) int64 {
	t.Helper()
	ctx := context.Background()
	store := redisstore.New(r.Client)
	sp, err := split.Spec{Total: spec.Total, Count: spec.Count}.Normalize()
	require.NoError(t, err)
	amounts, err := split.Split(sp, seed)
	require.NoError(t, err)
	require.NoError(t, l.WritePackets(ctx, spec.ID, amounts))
	layout := redisstore.Default.Layout(spec.ID, spec.Shards)
	shares := make([][]int64, spec.Shards)
	for i, a := range amounts {
		shares[i%spec.Shards] = append(shares[i%spec.Shards], a)
	}
	meta := func(k int) redisstore.Meta {
		var cents int64
		for _, a := range shares[k] {
			cents += a
		}
		m := redisstore.Meta{}
		if spec.Shards > 1 {
			m.Share = &redisstore.ShardShare{Shards: spec.Shards, Shard: k, BaseCount: int64(len(shares[k])), BaseCents: cents}
		}
		if k == 0 {
			m.Terms = &redisstore.Terms{Total: sp.Total, Count: int64(sp.Count), Min: sp.Min, Max: sp.Max,
				Split: string(sp.Algorithm), Seed: seed, Funding: hongbao.DefaultFunding}
		}
		return m
	}
	b, err := store.Begin(ctx, layout[0], redisstore.Loader{Token: "dead", Hold: hold}, meta(0))
	require.NoError(t, err)
	require.NotZero(t, b.Epoch)
	if spec.Shards > 1 {
		_, err := store.Begin(ctx, layout[1], redisstore.Loader{Token: "dead", Epoch: b.Epoch}, meta(1))
		require.NoError(t, err)
	}
	before := loadUntil(t, store, layout[0])
	require.NoError(t, store.Load(ctx, layout[0], "dead", 1, int64(spec.Shards), shares[0][:redisstore.LoadChunk], nil))
	until := loadUntil(t, store, layout[0])
	require.GreaterOrEqual(t, until, before, "the chunk renewed the hold")
	return until
}

// loadUntil is until when the load of root holds it (Redis clock, ms).
func loadUntil(t *testing.T, store *redisstore.Store, root redisstore.Keys) int64 {
	t.Helper()
	snap, err := store.Status(context.Background(), root)
	require.NoError(t, err)
	require.Equal(t, "loading", snap.Meta["state"])
	return snap.Int("load_until")
}

// TestCreateTakesOverDeadLoad: a create that died after the first chunk of
// its load (and after recording its packets, before its terms) holds the
// campaign until its hold lapses; creates of the id meanwhile wait, and
// once it lapsed exactly one takes the load over, with the seed the dead
// one recorded, and the others get ErrCampaignExists. The campaign is
// whole, and its packets are those the ledger recorded.
func TestCreateTakesOverDeadLoad(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			cr := newCreateRace(t, r, true)
			spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 50_000, Count: 3 * redisstore.LoadChunk, Shards: shards,
				ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
			until := deadLoad(t, r, cr.ledger, spec, 7, time.Second)
			c, errs := run(t, cr, func(ctx context.Context, eng *hongbao.Engine) (*hongbao.Campaign, error) {
				return eng.Create(ctx, spec)
			})
			requireOthersExist(t, errs)
			require.EqualValues(t, 7, c.Seed, "the seed of the packets recorded")
			snap, err := redisstore.New(r.Client).Status(context.Background(), redisstore.Default.CampaignKeys(spec.ID))
			require.NoError(t, err)
			require.GreaterOrEqual(t, snap.Int("created_at"), until, "taken over only once the hold lapsed")
			requireWholeCampaign(t, cr, spec, c)
		})
	}
}

// TestDiscountCreateTakesOverDeadLoad: TestCreateTakesOverDeadLoad for a
// discount campaign, whose root a dead create began and staged a chunk in.
func TestDiscountCreateTakesOverDeadLoad(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cr := newCreateRace(t, r, true)
			spec := hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 50_000, Quota: 400, Max: 500, Shards: shards,
				ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
			store := redisstore.New(r.Client)
			layout := redisstore.Default.DiscountLayout(spec.ID, shards)
			b, err := store.DiscountBegin(ctx, layout[0], redisstore.Loader{Token: "dead", Hold: time.Second},
				redisstore.DiscountMeta{Budget: 50_000, Quota: 400, ShardShare: redisstore.ShardShare{Shards: shards, BaseCount: 400, BaseCents: 50_000}})
			require.NoError(t, err)
			require.NotZero(t, b.Epoch)
			require.NoError(t, store.Load(ctx, layout[0].Keys(), "dead", 1, int64(shards), []int64{100, 100, 100}, nil))
			until := loadUntil(t, store, layout[0].Keys())

			d, errs := run(t, cr, func(ctx context.Context, eng *hongbao.Engine) (*hongbao.Discount, error) {
				return eng.Discounts().Create(ctx, spec)
			})
			requireOthersExist(t, errs)
			snap, err := store.Status(ctx, layout[0].Keys())
			require.NoError(t, err)
			require.GreaterOrEqual(t, snap.Int("created_at"), until, "taken over only once the hold lapsed")
			st, err := cr.engines[0].Discounts().Status(ctx, spec.ID)
			require.NoError(t, err)
			require.Equal(t, d.Seed, st.Seed)
			require.EqualValues(t, spec.Quota, st.RemainingCount)
			a := requireAudit(t, cr.engines[0], spec.ID)
			require.Equal(t, spec.Budget, a.PoolCents+a.CompensationCents)
		})
	}
}

// stallingLedger stops its first WritePackets until proceed is closed,
// after closing entered, and closes recorded once its first WriteTerms
// returned.
type stallingLedger struct {
	ledger.Ledger
	enter, terms               sync.Once
	entered, proceed, recorded chan struct{}
}

func (s *stallingLedger) WritePackets(ctx context.Context, id string, cents []int64) error {
	s.enter.Do(func() {
		close(s.entered)
		<-s.proceed
	})
	return s.Ledger.WritePackets(ctx, id, cents)
}

func (s *stallingLedger) WriteTerms(ctx context.Context, id string, t ledger.Terms) error {
	defer s.terms.Do(func() { close(s.recorded) })
	return s.Ledger.WriteTerms(ctx, id, t)
}

// TestCreateStalledLoaderLoses: a create that stalls half way (its Redis
// calls held back, as for a paused process or a network that holds its
// packets) past its hold loses the load to another create of the id, which
// takes it over and makes the campaign live; once it runs again, the
// stalled create finds its load taken over and answers ErrCampaignExists,
// never ErrLoadInterrupted. The campaign is whole, and the ledger's terms
// are those it went live with.
func TestCreateStalledLoaderLoses(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			path := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
			l, err := open.Open(ctx, path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			stall := &stallingLedger{Ledger: l, entered: make(chan struct{}), proceed: make(chan struct{}), recorded: make(chan struct{})}
			proxy := testenv.NewProxy(t, r.Addr)
			stalled, err := hongbao.New(hongbao.Config{Redis: testenv.Client(t, proxy.Addr), Packets: stall,
				LoadHold: 300 * time.Millisecond, Logger: quiet()})
			require.NoError(t, err)
			other, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, Logger: quiet()})
			require.NoError(t, err)
			spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 20_000, Count: 200, Shards: shards,
				ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)}

			var stalledErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, stalledErr = stalled.Create(ctx, spec)
			}()
			<-stall.entered // loaded, recording the packets
			proxy.Pause()
			close(stall.proceed)
			<-stall.recorded
			c, err := other.Create(ctx, spec)
			require.NoError(t, err, "taken over once the stalled create's hold lapsed")
			proxy.Resume()
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("the stalled create never returned")
			}
			require.NotErrorIs(t, stalledErr, hongbao.ErrLoadInterrupted)
			var exists *hongbao.ExistsError
			require.ErrorAs(t, stalledErr, &exists, "%v", stalledErr)
			require.Equal(t, hongbao.StateOpen, exists.State)

			requireWholeCampaign(t, &createRace{engines: []*hongbao.Engine{other}, ledger: l}, spec, c)
			terms, err := l.Terms(ctx, spec.ID)
			require.NoError(t, err)
			require.Equal(t, c.OpensAt.UnixMilli(), terms.OpensAt, "the terms of the create that went live")
			require.Equal(t, c.ClosesAt.UnixMilli(), terms.ClosesAt)
		})
	}
}
