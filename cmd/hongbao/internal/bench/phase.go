package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// phase is what the workers of one run's grab phase share, whatever the
// design: the start signal, each worker's latencies and counts, the owner
// of each packet, the problems found, the progress bar and the first error.
type phase struct {
	o       Options
	amounts []int64
	start   chan struct{}
	wg      sync.WaitGroup
	lats    []latencies
	counts  []counts
	owner   []atomic.Int32 // packet seq-1 -> user index + 1
	probs   problems
	bar     Progress
	// stopped is set when the workers must stop (an error, a failed
	// start); abort, if set, is how else the design stops them.
	stopped atomic.Bool
	abort   func()
	errOnce sync.Once
	err     error
}

// counts is what one worker counted.
type counts struct{ grabs, granted, soldOut, busy, unknown, cents int64 }

// newPhase prepares a phase whose bar counts to barTotal.
func newPhase(o Options, amounts []int64, label string, barTotal int64) *phase {
	return &phase{
		o: o, amounts: amounts, start: make(chan struct{}),
		lats:   make([]latencies, o.Concurrency),
		counts: make([]counts, o.Concurrency),
		owner:  make([]atomic.Int32, o.Packets),
		bar:    o.progress(label, barTotal),
	}
}

// spawn starts the workers, each on its share of the users; work runs
// once measure opens the start.
func (p *phase) spawn(work func(w, from, to int)) {
	for w := range p.o.Concurrency {
		from, to := userRange(w, p.o.Concurrency, p.o.Users)
		p.lats[w] = make(latencies, 0, to-from)
		p.wg.Go(func() {
			<-p.start
			work(w, from, to)
		})
	}
}

// stop tells the workers to stop.
func (p *phase) stop() {
	p.stopped.Store(true)
	if p.abort != nil {
		p.abort()
	}
}

// fail records the first error of the workers and stops them.
func (p *phase) fail(err error) {
	p.errOnce.Do(func() {
		p.err = err
		p.stop()
	})
}

// measure runs the measured grab phase (grabPhase) and returns the
// workers' first error, which says more than the phase's own, unless the
// phase stopped them itself.
func (p *phase) measure(ctx context.Context, t *target, rs *runStats) error {
	aborted := false
	perr := grabPhase(ctx, t, rs, p.start, &p.wg, p.bar, func() { aborted = true; p.stop() })
	if p.err != nil && !aborted {
		return p.err
	}
	return perr
}

// granted checks a packet a worker saw given to user u: a packet of the
// pool, given to no one else, with the amount the split made. verb says
// how the design words it.
func (p *phase) granted(u int, user string, seq, cents int64, verb string) {
	if seq < 1 || seq > int64(p.o.Packets) {
		p.probs.add("user %s was %s packet %d, outside 1..%d", user, verb, seq, p.o.Packets)
		return
	}
	if !p.owner[seq-1].CompareAndSwap(0, int32(u+1)) {
		p.probs.add("packet %d was %s to %s and %s", seq, verb, p.o.user(int(p.owner[seq-1].Load())-1), user)
	}
	if want := p.amounts[seq-1]; cents != want {
		p.probs.add("packet %d was %s with %d cents; the split made it %d", seq, verb, cents, want)
	}
}

// tally adds the workers' counts and latencies into rs and returns the
// cents they were told of.
func (p *phase) tally(rs *runStats) (cents int64) {
	rs.hist = histogramOf(p.lats)
	for w := range p.counts {
		c := &p.counts[w]
		rs.grabs += c.grabs
		rs.granted += c.granted
		rs.soldOut += c.soldOut
		rs.busy += c.busy
		rs.unknown += c.unknown
		cents += c.cents
	}
	return cents
}

// ticker moves a progress bar 64 steps at a time, so workers do not
// contend on it for every grab.
type ticker struct {
	bar Progress
	n   int64
}

func (t *ticker) tick() {
	if t.n++; t.n == 64 {
		t.bar.Add(t.n)
		t.n = 0
	}
}

// flush adds the steps not yet added.
func (t *ticker) flush() { t.bar.Add(t.n) }

// drop unlinks keys of a run on a shared Redis, after the run.
func (t *target) drop(keys ...string) {
	c := t.client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Do(ctx, c.B().Unlink().Key(keys...).Build()).Error()
}
