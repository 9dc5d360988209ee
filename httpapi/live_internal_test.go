package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestAmountBuckets: every amount falls in the bounds of its bucket, the
// buckets follow the amounts in order, and none is wider than 1/16 of
// its lower bound (exact below 16 cents).
func TestAmountBuckets(t *testing.T) {
	t.Parallel()
	check := func(v int64) {
		i := amountBucket(v)
		lo, hi := amountBounds(i)
		require.True(t, lo <= v && v < hi, "%d in bucket %d [%d, %d)", v, i, lo, hi)
		if lo >= amountSubs {
			require.LessOrEqual(t, (hi-lo)*amountSubs, lo, "bucket %d too wide", i)
		} else {
			require.EqualValues(t, 1, hi-lo)
		}
	}
	prev := -1
	for v := int64(1); v < 100_000; v++ {
		check(v)
		i := amountBucket(v)
		require.GreaterOrEqual(t, i, prev)
		prev = i
	}
	for e := 4; e < 53; e++ {
		for _, v := range []int64{1<<e - 1, 1 << e, 1<<e + 1} {
			check(v)
		}
	}
	check(1<<53 - 1)
	require.Less(t, amountBucket(1<<53-1), amountBuckets)
}

func statsWith(amounts ...int64) *liveStats {
	st := newLiveStats(time.Now())
	for _, a := range amounts {
		st.grant(a)
	}
	return st
}

// TestHistogram: the bars cover the amounts from the smallest to the
// largest in equal widths, and add up to the count exactly.
func TestHistogram(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	uniform := make([]int64, 10_000)
	for i := range uniform {
		uniform[i] = 100 + r.Int64N(100)
	}
	equal := make([]int64, 500)
	for i := range equal {
		equal[i] = 250
	}
	for name, tc := range map[string]struct {
		amounts []int64
		bars    int
	}{
		"uniform 1.00 to 1.99": {uniform, 20},
		"all equal":            {equal, 1},
		"extremes":             {[]int64{1, 1<<53 - 1}, 20},
		"one":                  {[]int64{7}, 1},
		"small range":          {[]int64{3, 4, 5}, 3},
	} {
		h := statsWith(tc.amounts...).histogram()
		require.EqualValues(t, len(tc.amounts), h.Count, name)
		require.Len(t, h.Bins, tc.bars, name)
		var n, sum int64
		for i, b := range h.Bins {
			n += b.Count
			require.Less(t, b.FromCents, b.ToCents, name)
			if i > 0 {
				require.Equal(t, h.Bins[i-1].ToCents, b.FromCents, name)
				require.Equal(t, h.Bins[0].ToCents-h.Bins[0].FromCents, h.Bins[i-1].ToCents-h.Bins[i-1].FromCents, "%s: equal widths", name)
			}
		}
		for _, a := range tc.amounts {
			sum += a
		}
		require.EqualValues(t, len(tc.amounts), n, name)
		require.Equal(t, sum, h.SumCents, name)
		require.Equal(t, h.MinCents, h.Bins[0].FromCents, name)
		require.Equal(t, h.MaxCents+1, h.Bins[len(h.Bins)-1].ToCents, name)
	}
	// Uniform amounts give level bars: each within 20% of the mean.
	h := statsWith(uniform...).histogram()
	for _, b := range h.Bins {
		require.InDelta(t, 500, b.Count, 100, "bar %+v", b)
	}
	require.Empty(t, statsWith().histogram().Bins)
}

// TestLiveStoreBounded: the store keeps at most max campaigns; the one
// unused the longest makes room, never a watched one; refusals and errors
// add no campaign.
func TestLiveStoreBounded(t *testing.T) {
	t.Parallel()
	watched := map[string]bool{"a": true}
	ls := &liveStore{max: 3, pinned: func(id string) bool { return watched[id] }}
	t0 := time.Unix(1_000_000, 0)
	ls.record("x", liveLimited, 0, t0)
	ls.record("y", liveError, 0, t0)
	require.Nil(t, ls.get("x"))
	require.Nil(t, ls.get("y"))

	ls.record("a", liveGranted, 10, t0)
	ls.record("b", liveGranted, 10, t0.Add(time.Second))
	ls.record("c", liveOutcomeOf(hongbao.SoldOut), 0, t0.Add(2*time.Second))
	ls.record("b", liveOutcomeOf(hongbao.Already), 10, t0.Add(3*time.Second))
	ls.record("d", liveOutcomeOf(hongbao.NotOpen), 0, t0.Add(4*time.Second)) // evicts c, not a (watched, older)
	require.NotNil(t, ls.get("a"))
	require.NotNil(t, ls.get("b"))
	require.Nil(t, ls.get("c"))
	require.NotNil(t, ls.get("d"))
	require.Equal(t, 3, ls.n)
	ls.record("b", liveLimited, 0, t0.Add(5*time.Second))
	require.EqualValues(t, 1, ls.get("b").outcomes[liveLimited].Load())
	require.EqualValues(t, 3, ls.get("b").answers())

	watched["b"], watched["d"] = true, true
	ls.record("e", liveGranted, 1, t0.Add(6*time.Second))
	require.Nil(t, ls.get("e"), "every slot is watched: nothing to evict")
	require.Equal(t, 3, ls.n)
}

// TestRateRing: a point per reading, the rate over the time between
// readings; a long pause starts anew; the window is the last minute.
func TestRateRing(t *testing.T) {
	t.Parallel()
	var r rateRing
	t0 := time.Unix(2_000_000, 0)
	r.add(t0, 0, 0)
	require.Empty(t, r.last(t0))
	r.add(t0.Add(time.Second), 10, 4)
	r.add(t0.Add(3*time.Second), 30, 8) // two seconds later
	require.Equal(t, []ratePoint{
		{T: t0.Add(time.Second).UnixMilli(), Grabs: 10, Grants: 4},
		{T: t0.Add(3 * time.Second).UnixMilli(), Grabs: 10, Grants: 2},
	}, r.last(t0.Add(3*time.Second)))
	r.add(t0.Add(30*time.Second), 1000, 9) // after a pause: no point
	require.Len(t, r.last(t0.Add(30*time.Second)), 2)
	r.add(t0.Add(31*time.Second), 1001, 9)
	require.Len(t, r.last(t0.Add(31*time.Second)), 3)
	require.Len(t, r.last(t0.Add(64*time.Second)), 1, "older than a minute")
	for i := 0; i < 200; i++ {
		r.add(t0.Add(time.Duration(32+i)*time.Second), int64(i), 9)
	}
	require.Len(t, r.last(t0.Add(231*time.Second)), 60)
}

// fakeReader counts its readings of a campaign whose grants grow.
type fakeReader struct {
	reads atomic.Int64
	gone  atomic.Bool
}

func (f *fakeReader) read(_ context.Context, id string) (*hongbao.Status, settle.Backlog, error) {
	n := f.reads.Add(1)
	if f.gone.Load() {
		return nil, settle.Backlog{}, hongbao.ErrCampaignNotFound
	}
	st := &hongbao.Status{Now: time.Now()}
	st.ID, st.State, st.Count, st.Total = id, hongbao.StateOpen, 100, 10000
	st.GrantedCount = n
	return st, settle.Backlog{}, nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func seqOf(t *testing.T, ev []byte) int64 {
	t.Helper()
	_, data, ok := bytes.Cut(ev, []byte("data: "))
	require.True(t, ok, "%s", ev)
	var e liveEvent
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(data), &e))
	return e.Live.Seq
}

// TestHubSharesReadings: fifty viewers of one campaign cost one reading
// per interval, each reading encoded once and handed to all; a viewer
// that never reads holds nobody up; the last to leave stops the sampler.
func TestHubSharesReadings(t *testing.T) {
	t.Parallel()
	f := &fakeReader{}
	h := newLiveHub(16, 100, 5*time.Millisecond, time.Second, f.read, quietLog(), time.Now)
	stuck, err := h.subscribe("c1") // never reads
	require.NoError(t, err)
	const viewers = 50
	var wg sync.WaitGroup
	seen := make([][]byte, viewers) // the last event each viewer got
	for i := 0; i < viewers; i++ {
		sub, err := h.subscribe("c1")
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.unsubscribe(sub)
			deadline := time.After(10 * time.Second)
			for {
				select {
				case ev := <-sub.ch:
					seen[i] = ev
					if seqOf(t, ev) >= 20 {
						return
					}
				case <-deadline:
					t.Errorf("viewer %d: no 20th reading", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, h.viewers())
	h.mu.Lock()
	w := h.watches["c1"]
	// The sampler still runs for the stuck viewer: take its last event and
	// the count of readings together, under the lock its publish takes.
	var last []byte
	if w != nil {
		last = w.last
	}
	reads := f.reads.Load()
	h.mu.Unlock()
	require.NotNil(t, w)
	top := seqOf(t, last)
	require.GreaterOrEqual(t, top, int64(20))
	require.GreaterOrEqual(t, reads, top)
	require.LessOrEqual(t, reads, top+1, "one reading per event, whatever the viewers (one may be in flight)")

	h.unsubscribe(stuck)
	require.Zero(t, h.viewers())
	select {
	case <-w.ended:
	default:
		t.Fatal("the sampler outlived its last viewer")
	}
	after := f.reads.Load()
	require.Empty(t, h.watches)
	// A new viewer starts a new sampler, which reads at once.
	sub, err := h.subscribe("c1")
	require.NoError(t, err)
	<-sub.ch
	require.Greater(t, f.reads.Load(), after)
	h.unsubscribe(sub)
}

// TestHubLimitsAndEnds: the views open at once are capped; a campaign
// that is gone ends its views; stop ends every view.
func TestHubLimitsAndEnds(t *testing.T) {
	t.Parallel()
	f := &fakeReader{}
	h := newLiveHub(4, 2, 5*time.Millisecond, time.Second, f.read, quietLog(), time.Now)
	a, err := h.subscribe("c1")
	require.NoError(t, err)
	b, err := h.subscribe("c2")
	require.NoError(t, err)
	_, err = h.subscribe("c3")
	require.ErrorIs(t, err, errTooManyWatchers)

	f.gone.Store(true)
	var last []byte
	for ev := range a.ch {
		last = ev
	}
	require.True(t, bytes.HasPrefix(last, []byte("event: gone\n")), "%s", last)
	h.unsubscribe(a) // after the end: nothing to undo
	for range b.ch {
	}
	h.unsubscribe(b)
	require.Zero(t, h.viewers())

	h.stop()
	_, err = h.subscribe("c1")
	require.ErrorIs(t, err, errLiveStopped)
	select {
	case <-h.done:
	default:
		t.Fatal("stop did not close done")
	}
}

// BenchmarkLiveRecord is what the console's counting adds to each answered
// grab, from every core at once on one campaign (the contended case).
func BenchmarkLiveRecord(b *testing.B) {
	ls := &liveStore{max: 256}
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			ls.record("bench-campaign", liveGranted, 100+i%200, now)
		}
	})
}

// BenchmarkLiveReading is one reading of a watched campaign, the work a
// live view costs each second whatever its viewers: the status and the
// settlement backlog from a real Redis, the histogram and the encoded
// event.
func BenchmarkLiveReading(b *testing.B) {
	r := testenv.SharedRedis(b)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(b, err)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(b), Total: 1_000_000, Count: 10_000})
	require.NoError(b, err)
	s := &Server{cfg: Config{Engine: eng, Store: eng, Settlement: settle.NewBacklogs(r.Client, "")}}
	h := newLiveHub(16, 16, time.Second, 5*time.Second, s.readLive, quietLog(), time.Now)
	for i := 0; i < 2000; i++ {
		g, err := eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(b, err)
		h.store.record(c.ID, liveOutcomeOf(g.Outcome), g.Cents, time.Now())
	}
	w := &watch{id: c.ID, stats: h.store.get(c.ID)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev, gone, err := h.reading(ctx, w)
		if err != nil || gone || len(ev) == 0 {
			b.Fatalf("reading: %v %v", gone, err)
		}
	}
}
