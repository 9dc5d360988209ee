package hongbao_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/split"
)

func newEngine(t *testing.T) (*hongbao.Engine, *testenv.Redis) {
	t.Helper()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, WithoutLedger: true})
	require.NoError(t, err)
	return eng, r
}

func seed(v uint64) *uint64 { return &v }

func create(t *testing.T, eng *hongbao.Engine, spec hongbao.Spec) *hongbao.Campaign {
	t.Helper()
	if spec.ID == "" {
		spec.ID = testenv.UniqueID(t)
	}
	c, err := eng.Create(context.Background(), spec)
	require.NoError(t, err)
	return c
}

// TestConcurrentRain is the core invariant test: many goroutines, every
// user clicking three times at once, far more users than packets.
func TestConcurrentRain(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	const (
		packets = 5000
		users   = 20000
		clicks  = 3
		workers = 64
		total   = int64(500000)
	)
	c := create(t, eng, hongbao.Spec{Total: total, Count: packets})
	require.Equal(t, hongbao.StateOpen, c.State)

	answers := make([][clicks]hongbao.Grant, users)
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, workers*clicks)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				var inner sync.WaitGroup
				for k := 0; k < clicks; k++ {
					inner.Add(1)
					go func() {
						defer inner.Done()
						g, err := eng.Grab(ctx, c.ID, "user-"+strconv.Itoa(u))
						if err != nil {
							errs <- err
							return
						}
						answers[u][k] = g
					}()
				}
				inner.Wait()
			}
		}()
	}
	for u := 0; u < users; u++ {
		next <- u
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	owner := map[int64]int{}
	var granted, grantedCents int64
	for u, as := range answers {
		var mine *hongbao.Grant
		nGranted := 0
		for k := range as {
			g := &answers[u][k]
			switch g.Outcome {
			case hongbao.Granted:
				nGranted++
			case hongbao.Already, hongbao.SoldOut:
			default:
				t.Fatalf("user %d click %d: unexpected outcome %s", u, k, g.Outcome)
			}
			if !g.Outcome.HasPacket() {
				continue
			}
			if mine == nil {
				mine = g
			}
			require.Equal(t, mine.Seq, g.Seq, "user %d told two packets", u)
			require.Equal(t, mine.Cents, g.Cents, "user %d told two amounts", u)
		}
		require.LessOrEqual(t, nGranted, 1, "user %d granted twice", u)
		if mine == nil {
			continue
		}
		require.Equal(t, 1, nGranted, "user %d holds a packet but was never told GRANTED", u)
		prev, dup := owner[mine.Seq]
		require.False(t, dup, "packet %d told to users %d and %d", mine.Seq, prev, u)
		owner[mine.Seq] = u
		granted++
		grantedCents += mine.Cents
	}
	require.EqualValues(t, packets, granted)
	require.Equal(t, total, grantedCents, "every packet granted: the grants sum to the total")

	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State)
	require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)
	require.EqualValues(t, packets, st.GrantedCount)
	require.Equal(t, total, st.GrantedCents+st.RemainingCents)
	require.Zero(t, st.RemainingCount)

	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, packets, a.StreamCount, "the grants stream holds exactly the grants")
	require.Equal(t, total, a.StreamCents)
	require.EqualValues(t, packets, a.ClaimsCount)
}

// TestPartialRainConservation stops halfway: granted + pool = total.
func TestPartialRainConservation(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 100003, Count: 1000, Split: split.LineCut, Seed: seed(7)})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				// assert, not require: FailNow must not run off the test's goroutine.
				_, err := eng.Grab(ctx, c.ID, fmt.Sprintf("w%d-%d", w, i))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateOpen, st.State)
	require.EqualValues(t, 400, st.GrantedCount)
	require.EqualValues(t, 600, st.RemainingCount)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.Equal(t, int64(100003), a.StreamCents+a.PoolCents)
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()

	t.Run("no campaign", func(t *testing.T) {
		t.Parallel()
		_, err := eng.Grab(ctx, testenv.UniqueID(t), "alice")
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
		_, err = eng.Status(ctx, testenv.UniqueID(t))
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
		_, err = eng.CloseCampaign(ctx, testenv.UniqueID(t))
		require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	})

	t.Run("not open, then cancelled", func(t *testing.T) {
		t.Parallel()
		c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, OpensAt: time.Now().Add(time.Hour)})
		require.Equal(t, hongbao.StateScheduled, c.State)
		g, err := eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.NotOpen, g.Outcome)
		require.Zero(t, g.Seq)
		st, err := eng.CloseCampaign(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.StateClosed, st.State)
		require.Equal(t, hongbao.CloseCancelled, st.CloseReason)
		g, err = eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Closed, g.Outcome)
	})

	t.Run("closed by an operator keeps holders' packets", func(t *testing.T) {
		t.Parallel()
		c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10})
		g1, err := eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g1.Outcome)
		st, err := eng.CloseCampaign(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseOperator, st.CloseReason)
		g, err := eng.Grab(ctx, c.ID, "bob")
		require.NoError(t, err)
		require.Equal(t, hongbao.Closed, g.Outcome)
		g, err = eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Already, g.Outcome)
		require.Equal(t, g1.Seq, g.Seq)
		require.Equal(t, g1.Cents, g.Cents)
		// Closing again changes nothing.
		st2, err := eng.CloseCampaign(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseOperator, st2.CloseReason)
		require.EqualValues(t, 9, st2.RemainingCount)
	})

	t.Run("closed by time", func(t *testing.T) {
		t.Parallel()
		c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10, ClosesAt: time.Now().Add(300 * time.Millisecond)})
		g1, err := eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g1.Outcome)
		require.Eventually(t, func() bool {
			st, err := eng.Status(ctx, c.ID)
			return err == nil && st.State == hongbao.StateClosed
		}, 5*time.Second, 20*time.Millisecond)
		g, err := eng.Grab(ctx, c.ID, "bob")
		require.NoError(t, err)
		require.Equal(t, hongbao.Closed, g.Outcome)
		g, err = eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Already, g.Outcome)
		st, err := eng.Status(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.StateClosed, st.State)
		require.Equal(t, hongbao.CloseTime, st.CloseReason)
	})

	t.Run("sold out", func(t *testing.T) {
		t.Parallel()
		c := create(t, eng, hongbao.Spec{Total: 500, Count: 1})
		g, err := eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		require.EqualValues(t, 500, g.Cents)
		require.Equal(t, c.ID+"/1", g.PacketID())
		g, err = eng.Grab(ctx, c.ID, "bob")
		require.NoError(t, err)
		require.Equal(t, hongbao.SoldOut, g.Outcome, "an empty pool is SOLD_OUT, not CLOSED")
		g, err = eng.Grab(ctx, c.ID, "alice")
		require.NoError(t, err)
		require.Equal(t, hongbao.Already, g.Outcome)
		st, err := eng.Status(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)
		// An operator close after selling out keeps the reason.
		st, err = eng.CloseCampaign(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)
		g, err = eng.Grab(ctx, c.ID, "carol")
		require.NoError(t, err)
		require.Equal(t, hongbao.SoldOut, g.Outcome)
	})
}

// TestBatchWithRepeatedUser drives grab.lua with a batch in which users
// appear more than once.
func TestBatchWithRepeatedUser(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)

	c := create(t, eng, hongbao.Spec{Total: 300, Count: 3, Split: split.Fixed})
	users := []string{"a", "b", "a", "a", "b"}
	out := make([]redisstore.GrabResult, len(users))
	require.NoError(t, store.Grab(ctx, redisstore.GrabKeys(redisstore.Default.CampaignKeys(c.ID)), 1, users, out))
	require.Equal(t, redisstore.Granted, out[0].Outcome)
	require.Equal(t, redisstore.Granted, out[1].Outcome)
	require.NotEqual(t, out[0].Seq, out[1].Seq)
	for _, i := range []int{2, 3} {
		require.Equal(t, redisstore.GrabResult{Outcome: redisstore.Already, Seq: out[0].Seq, Cents: out[0].Cents}, out[i])
	}
	require.Equal(t, redisstore.GrabResult{Outcome: redisstore.Already, Seq: out[1].Seq, Cents: out[1].Cents}, out[4])

	// One packet left: the first new user gets it, the second is sold out,
	// and a repeat of each gets the same answer.
	users = []string{"c", "d", "c", "d", "a"}
	out = make([]redisstore.GrabResult, len(users))
	require.NoError(t, store.Grab(ctx, redisstore.GrabKeys(redisstore.Default.CampaignKeys(c.ID)), 1, users, out))
	require.Equal(t, redisstore.Granted, out[0].Outcome)
	require.Equal(t, redisstore.SoldOut, out[1].Outcome)
	require.Equal(t, redisstore.Already, out[2].Outcome)
	require.Equal(t, out[0].Seq, out[2].Seq)
	require.Equal(t, redisstore.SoldOut, out[3].Outcome)
	require.Equal(t, redisstore.Already, out[4].Outcome)

	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 3, a.StreamCount)

	// Batch size limits are checked before anything is written.
	err = store.Grab(ctx, redisstore.GrabKeys(redisstore.Default.CampaignKeys(c.ID)), 1, make([]string, redisstore.MaxBatch+1), make([]redisstore.GrabResult, redisstore.MaxBatch+1))
	require.ErrorIs(t, err, redisstore.ErrArgs)
}

// TestInterruptedCreate: a load that stops halfway answers no grab, and
// running the create again yields exactly one whole pool.
func TestInterruptedCreate(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	id := testenv.UniqueID(t)

	// A create that crashed after loading part of its pool.
	b, err := store.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "crashed-loader"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 10000, Count: 5000}})
	require.NoError(t, err)
	require.NotZero(t, b.Epoch, "loading")
	part := make([]int64, 4000)
	for i := range part {
		part[i] = 2
	}
	require.NoError(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "crashed-loader", 1, 1, part, nil))

	_, err = eng.Grab(ctx, id, "alice")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "a half-loaded campaign answers no grab")
	_, err = eng.Status(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	_, err = eng.CloseCampaign(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)

	// The create is run again and completes.
	c, err := eng.Create(ctx, hongbao.Spec{ID: id, Total: 10000, Count: 5000})
	require.NoError(t, err)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 5000, st.RemainingCount, "the pool is not doubled")
	a, err := eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.EqualValues(t, 10000, a.PoolCents)

	// The crashed loader cannot come back and spoil it.
	require.ErrorIs(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "crashed-loader", 1, 1, part[:10], nil), redisstore.ErrStale)
	_, err = store.Activate(ctx, redisstore.Default.CampaignKeys(id), "crashed-loader", 0, 0, 1000)
	require.ErrorIs(t, err, redisstore.ErrStale)

	// Creating it once more is refused and changes nothing.
	_, err = eng.Create(ctx, hongbao.Spec{ID: id, Total: 10000, Count: 5000})
	require.ErrorIs(t, err, hongbao.ErrCampaignExists)
	st, err = eng.Status(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, 5000, st.RemainingCount)
}

// TestActivateChecksContents: a staging list that does not match the spec
// never goes live.
func TestActivateChecksContents(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	store := redisstore.New(r.Client)
	id := testenv.UniqueID(t)
	_, err := store.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 100, Count: 3}})
	require.NoError(t, err)
	require.NoError(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "tok", 1, 1, []int64{50, 50}, nil))
	_, err = store.Activate(ctx, redisstore.Default.CampaignKeys(id), "tok", 0, 0, 60000)
	require.ErrorIs(t, err, redisstore.ErrContents, "too few packets")
	// A chunk that does not start where the staged list ends is refused.
	require.ErrorIs(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "tok", 1, 1, []int64{1}, nil), redisstore.ErrStale)

	_, err = store.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok2"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 100, Count: 3}})
	require.NoError(t, err)
	require.NoError(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "tok2", 1, 1, []int64{50, 49, 2}, nil))
	_, err = store.Activate(ctx, redisstore.Default.CampaignKeys(id), "tok2", 0, 0, 60000)
	require.ErrorIs(t, err, redisstore.ErrContents, "wrong sum")

	_, err = store.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok3"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 100, Count: 2}})
	require.NoError(t, err)
	require.ErrorIs(t, store.Load(ctx, redisstore.Default.CampaignKeys(id), "tok3", 1, 1, []int64{100, 0}, nil), redisstore.ErrContents, "zero amount")
	_, err = eng.Grab(ctx, id, "x")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	now := time.Now()
	cases := []struct {
		name string
		spec hongbao.Spec
		want error
	}{
		{"zero packets", hongbao.Spec{Total: 100, Count: 0}, hongbao.ErrInvalidSpec},
		{"zero total", hongbao.Spec{Total: 0, Count: 1}, hongbao.ErrInvalidSpec},
		{"negative total", hongbao.Spec{Total: -5, Count: 1}, hongbao.ErrInvalidSpec},
		{"more packets than cents", hongbao.Spec{Total: 100, Count: 101}, hongbao.ErrInvalidSpec},
		{"max too small", hongbao.Spec{Total: 100, Count: 2, Max: 40}, hongbao.ErrInvalidSpec},
		{"total over 2^53", hongbao.Spec{Total: 1 << 53, Count: 1}, hongbao.ErrInvalidSpec},
		{"closes before it opens", hongbao.Spec{Total: 100, Count: 1, OpensAt: now.Add(time.Hour), ClosesAt: now}, hongbao.ErrInvalidSpec},
		{"closes in the past", hongbao.Spec{Total: 100, Count: 1, ClosesAt: now.Add(-time.Hour)}, hongbao.ErrInvalidSpec},
		{"bad id", hongbao.Spec{ID: "a{b}", Total: 100, Count: 1}, hongbao.ErrInvalidID},
		{"long id", hongbao.Spec{ID: string(make([]byte, 65)), Total: 100, Count: 1}, hongbao.ErrInvalidID},
		{"bad funding", hongbao.Spec{Total: 100, Count: 1, Funding: "a b"}, hongbao.ErrInvalidID},
		{"unknown split", hongbao.Spec{Total: 100, Count: 1, Split: "magic"}, hongbao.ErrInvalidSpec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := eng.Create(ctx, tc.spec)
			require.ErrorIs(t, err, tc.want)
		})
	}
	c := create(t, eng, hongbao.Spec{Total: 100, Count: 1})
	for _, u := range []string{"", "a b", "x{y}", string(make([]byte, 65))} {
		_, err := eng.Grab(ctx, c.ID, u)
		require.ErrorIs(t, err, hongbao.ErrInvalidID, "user %q", u)
	}
}

// TestLargeAmountsKeepPrecision: totals near 2^53 cents survive Lua's
// doubles to the cent.
func TestLargeAmountsKeepPrecision(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: split.MaxTotal, Count: 3, Split: split.Fixed})
	var sum int64
	for _, u := range []string{"a", "b", "c"} {
		g, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		sum += g.Cents
	}
	require.Equal(t, split.MaxTotal, sum)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, split.MaxTotal, st.GrantedCents)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
}

// TestNoScriptAfterFlush: the scripts come back by EVAL after SCRIPT FLUSH.
func TestNoScriptAfterFlush(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{Total: 100, Count: 2, Split: split.Fixed})
	require.NoError(t, err)
	g, err := eng.Grab(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	require.NoError(t, r.Client.Do(ctx, r.Client.B().ScriptFlush().Build()).Error())
	g2, err := eng.Grab(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Already, g2.Outcome)
	require.Equal(t, g.Seq, g2.Seq)
	g3, err := eng.Grab(ctx, c.ID, "bob")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g3.Outcome)
}

// TestLostReplyRetry: when the answer to a grab is lost after the script
// ran, the outcome is unknown; the retry returns the packet the first call
// granted.
func TestLostReplyRetry(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	eng, err := hongbao.New(hongbao.Config{Redis: testenv.Client(t, proxy.Addr)})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 150, Count: 3, Split: split.Fixed})
	require.NoError(t, err)
	// Load grab.lua first, so the call whose reply is lost is the EVALSHA
	// that runs it (not a NOSCRIPT answer).
	_, err = eng.Grab(ctx, c.ID, "warm-up")
	require.NoError(t, err)

	proxy.DropNextReply()
	_, err = eng.Grab(ctx, c.ID, "alice")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	requireOnePrefix(t, err)

	g, err := eng.Grab(ctx, c.ID, "alice")
	require.NoError(t, err)
	require.Equal(t, hongbao.Already, g.Outcome, "the lost call granted the packet; the retry returns it")
	require.EqualValues(t, 50, g.Cents)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.GrantedCount)
}
