package httpapi

import (
	"math"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao"
)

// The console's live view of a campaign has two sources: what this
// process answered to grabs (outcome counts and the amounts it granted),
// counted here on the grab path with a few atomic adds, and a reading of
// Redis once a second while someone watches (livehub.go).

// liveOutcome indexes the answers counted per campaign: an engine's
// Outcome is its own index (hongbao.OutcomeTable), the refusals that
// never reached the engine come after them.
type liveOutcome int

const (
	liveGranted liveOutcome = liveOutcome(hongbao.Granted)
	liveLimited liveOutcome = hongbao.MaxOutcomeCode + iota - 1 // refused by a rate limit before reaching the engine
	liveBusy                                                    // shed by the engine's queue
	liveError                                                   // outcome unknown, time out, internal error
	numLiveOutcomes
)

// liveOutcomeNames are the keys of the outcome counts in the live view,
// "" at the indexes of no outcome: the engine's outcomes are spelled with
// their labels (hongbao.OutcomeTable), as the grab answer spells them.
var liveOutcomeNames = func() (names [numLiveOutcomes]string) {
	for _, o := range hongbao.GrabOutcomes() {
		names[o] = o.Label()
	}
	names[liveLimited], names[liveBusy], names[liveError] = "rate_limited", "busy", "error"
	return names
}()

func liveOutcomeOf(o hongbao.Outcome) liveOutcome {
	if int(o) < hongbao.MaxOutcomeCode && liveOutcomeNames[o] != "" {
		return liveOutcome(o)
	}
	return liveError
}

// The amounts histogram is log-linear: exact below 2^amountSubBits cents,
// then amountSubs buckets per power of two, so a bucket is at most 1/16
// (6.25%) of its values wide, and the 2^53 cents a campaign can hold fit
// in a few hundred counters.
const (
	amountSubBits = 4
	amountSubs    = 1 << amountSubBits
	amountMaxExp  = 53
	amountBuckets = amountSubs + (amountMaxExp-amountSubBits)*amountSubs
)

// amountBucket is the bucket of a positive amount in cents.
func amountBucket(cents int64) int {
	if cents < amountSubs {
		return int(max(cents, 0))
	}
	e := bits.Len64(uint64(cents)) - 1 // 2^e <= cents < 2^(e+1), e >= amountSubBits
	sub := int(cents>>(e-amountSubBits)) & (amountSubs - 1)
	return min(amountSubs+(e-amountSubBits)*amountSubs+sub, amountBuckets-1)
}

// amountBounds is the range [lo, hi) of cents that bucket i counts.
func amountBounds(i int) (lo, hi int64) {
	if i < amountSubs {
		return int64(i), int64(i) + 1
	}
	e := (i-amountSubs)/amountSubs + amountSubBits
	sub := int64((i - amountSubs) % amountSubs)
	shift := e - amountSubBits
	return (amountSubs + sub) << shift, (amountSubs + sub + 1) << shift
}

// liveStats are one campaign's counts of this process's answers.
type liveStats struct {
	outcomes [numLiveOutcomes]atomic.Int64
	amounts  [amountBuckets]atomic.Int64
	sumCents atomic.Int64
	minCents atomic.Int64 // 0 until the first grant
	maxCents atomic.Int64
	lastUsed atomic.Int64 // Unix seconds of the last answer, for eviction
	since    time.Time    // when this process started counting

	// rates is the per-second history the sampler keeps (livehub.go).
	mu    sync.Mutex
	rates rateRing
}

func newLiveStats(now time.Time) *liveStats {
	st := &liveStats{since: now}
	st.lastUsed.Store(now.Unix())
	return st
}

// touch records that the campaign was used at sec, writing only when the
// second changed: most answers only read the shared word.
func (st *liveStats) touch(sec int64) {
	if st.lastUsed.Load() != sec {
		st.lastUsed.Store(sec)
	}
}

func (st *liveStats) grant(cents int64) {
	st.amounts[amountBucket(cents)].Add(1)
	st.sumCents.Add(cents)
	for {
		m := st.minCents.Load()
		if (m != 0 && m <= cents) || st.minCents.CompareAndSwap(m, cents) {
			break
		}
	}
	for {
		m := st.maxCents.Load()
		if m >= cents || st.maxCents.CompareAndSwap(m, cents) {
			break
		}
	}
}

// answers is the number of answers counted, every outcome together.
func (st *liveStats) answers() int64 {
	var n int64
	for i := range st.outcomes {
		n += st.outcomes[i].Load()
	}
	return n
}

// liveStore holds the liveStats of at most max campaigns; when it is full,
// a new campaign takes the place of the one unused the longest that
// nobody watches. Lookups on the grab path take no lock.
type liveStore struct {
	max   int
	stats sync.Map // campaign id -> *liveStats
	mu    sync.Mutex
	n     int
	// pinned says whether a campaign is watched; its stats are never
	// evicted (the sampler holds them). Called with mu held.
	pinned func(id string) bool
}

// get returns the stats of campaign id, or nil when it has none.
func (ls *liveStore) get(id string) *liveStats {
	if v, ok := ls.stats.Load(id); ok {
		return v.(*liveStats)
	}
	return nil
}

// getOrAdd returns the stats of campaign id, adding them when missing; nil
// when the store is full of watched campaigns.
func (ls *liveStore) getOrAdd(id string, now time.Time) *liveStats {
	if st := ls.get(id); st != nil {
		return st
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if st := ls.get(id); st != nil {
		return st
	}
	if ls.n >= ls.max && !ls.evictLocked() {
		return nil
	}
	st := newLiveStats(now)
	ls.stats.Store(id, st)
	ls.n++
	return st
}

// evictLocked drops the stats unused the longest among those not watched.
func (ls *liveStore) evictLocked() bool {
	victim, oldest := "", int64(math.MaxInt64)
	ls.stats.Range(func(k, v any) bool {
		id := k.(string)
		if t := v.(*liveStats).lastUsed.Load(); t < oldest && (ls.pinned == nil || !ls.pinned(id)) {
			victim, oldest = id, t
		}
		return true
	})
	if victim == "" {
		return false
	}
	ls.stats.Delete(victim)
	ls.n--
	return true
}

// record counts an engine answer to a grab of campaign id. Only answers
// that prove the campaign exists add it to the store: errors and refusals
// of unknown ids must not fill it.
func (ls *liveStore) record(id string, o liveOutcome, cents int64, now time.Time) {
	var st *liveStats
	if o < hongbao.MaxOutcomeCode { // an engine's answer
		st = ls.getOrAdd(id, now)
	} else {
		st = ls.get(id)
	}
	if st == nil {
		return
	}
	st.touch(now.Unix())
	st.outcomes[o].Add(1)
	if o == liveGranted {
		st.grant(cents)
	}
}

// ratePoint is one second of the history: answers per second of this
// process and grants per second of the campaign (every process, as Redis
// counts them), between the reading at T and the one before.
type ratePoint struct {
	T      int64   `json:"t"` // Unix milliseconds of the reading
	Grabs  float64 `json:"grabs"`
	Grants float64 `json:"grants"`
}

// rateWindow is the history kept and shown.
const rateWindow = 60 * time.Second

// rateRing keeps the points of the last rateWindow, and the previous
// reading to compute the next point from.
type rateRing struct {
	points              [64]ratePoint
	next, n             int
	prevAt              time.Time
	prevGrabs, prevGrnt int64
}

// add turns a reading (answers counted, grants in Redis, at at) into a
// point. A reading after a pause of more than a few seconds starts anew:
// a rate over the gap would say nothing of any second.
func (r *rateRing) add(at time.Time, grabs, granted int64) {
	dt := at.Sub(r.prevAt).Seconds()
	if !r.prevAt.IsZero() && dt > 0.2 && dt < 5 {
		round := func(v float64) float64 { return math.Round(max(v, 0)*10) / 10 }
		r.points[r.next] = ratePoint{
			T:      at.UnixMilli(),
			Grabs:  round(float64(grabs-r.prevGrabs) / dt),
			Grants: round(float64(granted-r.prevGrnt) / dt),
		}
		r.next = (r.next + 1) % len(r.points)
		r.n = min(r.n+1, len(r.points))
	}
	if dt <= 0.2 && !r.prevAt.IsZero() {
		return // too close to the last reading to measure a rate; keep its base
	}
	r.prevAt, r.prevGrabs, r.prevGrnt = at, grabs, granted
}

// last returns the points of the rateWindow before now, oldest first.
func (r *rateRing) last(now time.Time) []ratePoint {
	out := make([]ratePoint, 0, r.n)
	from := now.Add(-rateWindow).UnixMilli()
	for i := 0; i < r.n; i++ {
		p := r.points[(r.next-r.n+i+len(r.points))%len(r.points)]
		if p.T > from {
			out = append(out, p)
		}
	}
	return out
}

// amountBin is one bar of the amounts histogram: Count grants of at least
// FromCents and less than ToCents.
type amountBin struct {
	FromCents int64 `json:"from_cents"`
	ToCents   int64 `json:"to_cents"`
	Count     int64 `json:"count"`
}

// amountsOut summarises the amounts this process granted.
type amountsOut struct {
	Count    int64       `json:"count"`
	SumCents int64       `json:"sum_cents"`
	MinCents int64       `json:"min_cents"`
	MaxCents int64       `json:"max_cents"`
	Bins     []amountBin `json:"bins"`
}

// maxAmountBins is the most bars the histogram has.
const maxAmountBins = 20

// histogram returns the amounts granted in at most maxAmountBins bars of equal
// width in whole cents, from the smallest amount granted to the largest.
// A bucket that straddles bars is shared among them in proportion to the
// overlap, its amounts taken as spread evenly within it, and the shares
// are rounded so the bars add up to the count exactly.
func (st *liveStats) histogram() amountsOut {
	out := amountsOut{SumCents: st.sumCents.Load(), MinCents: st.minCents.Load(), MaxCents: st.maxCents.Load(), Bins: []amountBin{}}
	var counts [amountBuckets]int64
	for i := range counts {
		counts[i] = st.amounts[i].Load()
		out.Count += counts[i]
	}
	if out.Count == 0 || out.MinCents <= 0 || out.MaxCents < out.MinCents {
		return out
	}
	lo, hi := out.MinCents, out.MaxCents+1
	width := (hi - lo + maxAmountBins - 1) / maxAmountBins
	nbins := int((hi - lo + width - 1) / width)
	shares := make([]float64, nbins)
	for i, c := range counts {
		if c == 0 {
			continue
		}
		blo, bhi := amountBounds(i)
		blo, bhi = max(blo, lo), min(bhi, hi) // the observed range is within the buckets used
		if bhi <= blo {
			shares[clampBin(int((min(blo, hi-1)-lo)/width), nbins)] += float64(c)
			continue
		}
		for b := clampBin(int((blo-lo)/width), nbins); b < nbins; b++ {
			from := lo + int64(b)*width
			ov := min(bhi, from+width) - max(blo, from)
			if ov <= 0 {
				break
			}
			shares[b] += float64(c) * float64(ov) / float64(bhi-blo)
		}
	}
	for b, n := range roundShares(shares, out.Count) {
		from := lo + int64(b)*width
		out.Bins = append(out.Bins, amountBin{FromCents: from, ToCents: min(from+width, hi), Count: n})
	}
	return out
}

func clampBin(b, n int) int { return min(max(b, 0), n-1) }

// roundShares rounds shares (which add up to total) to integers that add
// up to total exactly: each is rounded down, and the units left go to the
// largest remainders. The sum of the floors is at most total, and short
// of it by less than len(shares).
func roundShares(shares []float64, total int64) []int64 {
	out := make([]int64, len(shares))
	var sum int64
	idx := make([]int, len(shares))
	for i, s := range shares {
		out[i] = int64(math.Floor(s))
		sum += out[i]
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return shares[idx[a]]-math.Floor(shares[idx[a]]) > shares[idx[b]]-math.Floor(shares[idx[b]])
	})
	for i := 0; sum < total && len(idx) > 0; i = (i + 1) % len(idx) {
		out[idx[i]]++
		sum++
	}
	return out
}
