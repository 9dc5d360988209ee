package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// runEngine runs one engine measurement: Create loads the campaign (the
// same spec and seed, so the same packets as the classic pool), then
// Concurrency goroutines each grab once for every user of their share.
func runEngine(ctx context.Context, t *target, o Options, amounts []int64, label string) (*runStats, error) {
	id := "bench-" + t.runID
	keys := redisstore.CampaignKeys(id)
	if t.shared {
		defer func() {
			c := t.client
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Do(cctx, c.B().Unlink().Key(keys.Meta, keys.Pool, keys.Claims, keys.Grants, keys.Dead, keys.Staging).Build()).Error()
			_ = c.Do(cctx, c.B().Zrem().Key(redisstore.CampaignsIndex).Member(id).Build()).Error()
		}()
	}
	load := o.progress("loading", int64(o.Packets))
	eng, err := hongbao.New(hongbao.Config{
		Redis:        t.client,
		MaxBatch:     o.MaxBatch,
		LoadProgress: func(n, _ int) { load.Set(int64(n)) },
	})
	if err != nil {
		load.Done()
		return nil, err
	}
	seed := o.Seed
	camp, err := eng.Create(ctx, hongbao.Spec{ID: id, Total: o.Total, Count: o.Packets, Split: o.Split, Seed: &seed})
	load.Done()
	if err != nil {
		return nil, err
	}
	rs := &runStats{}
	if rs.pooledBytes, err = t.memoryUsage(ctx, keys.Pool); err != nil {
		return nil, err
	}

	var (
		probs   problems
		owner   = make([]atomic.Int32, o.Packets) // seq-1 -> user index + 1
		lats    = make([]latencies, o.Concurrency)
		counts  = make([]struct{ grabs, granted, soldOut, busy, cents int64 }, o.Concurrency)
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errOnce sync.Once
		runErr  error
	)
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) { errOnce.Do(func() { runErr = err; cancel() }) }
	bar := o.progress(label, int64(o.Users))
	for w := 0; w < o.Concurrency; w++ {
		from, to := userRange(w, o.Concurrency, o.Users)
		lats[w] = make(latencies, 0, to-from)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, n := &lats[w], &counts[w]
			<-start
			done := 0
			for u := from; u < to; u++ {
				t0 := time.Now()
				g, err := eng.Grab(gctx, camp.ID, UserName(u))
				lat.add(time.Since(t0))
				if errors.Is(err, hongbao.ErrBusy) {
					n.busy++
					n.grabs++
					continue
				}
				if err != nil {
					fail(err)
					return
				}
				n.grabs++
				switch g.Outcome {
				case hongbao.Granted:
					n.granted++
					n.cents += g.Cents
					if g.Seq < 1 || g.Seq > int64(o.Packets) {
						probs.add("user %s was granted packet %d, outside 1..%d", g.User, g.Seq, o.Packets)
						break
					}
					if !owner[g.Seq-1].CompareAndSwap(0, int32(u+1)) {
						probs.add("packet %d was granted to %s and %s", g.Seq, UserName(int(owner[g.Seq-1].Load())-1), g.User)
					}
					if want := amounts[g.Seq-1]; g.Cents != want {
						probs.add("packet %d was granted with %d cents; the split made it %d", g.Seq, g.Cents, want)
					}
				case hongbao.SoldOut:
					n.soldOut++
				default:
					probs.add("user %s was answered %s", g.User, g.Outcome)
				}
				if done++; done == 64 {
					bar.Add(int64(done))
					done = 0
				}
			}
			bar.Add(int64(done))
		}()
	}
	perr := grabPhase(ctx, t, rs, start, &wg, bar, cancel)
	if runErr != nil {
		return nil, runErr // the workers' own error says more
	}
	if perr != nil {
		return nil, perr
	}

	var grantedCents int64
	rs.hist = histogramOf(lats)
	for w := range counts {
		c := &counts[w]
		rs.grabs += c.grabs
		rs.granted += c.granted
		rs.soldOut += c.soldOut
		rs.busy += c.busy
		grantedCents += c.cents
	}
	st := eng.Stats()
	rs.batches, rs.carried = st.Batches, st.Grabs
	for _, b := range st.BatchSizes {
		rs.sizes = append(rs.sizes, BatchBucket{Max: b.Max, Count: b.Count})
	}
	if rs.grantBytes, err = t.memoryUsage(ctx, keys.Claims, keys.Grants); err != nil {
		return nil, err
	}

	// The invariants: the engine's own audit of the Redis contents, then
	// what the clients were told against it and against the split.
	audit, err := eng.Audit(ctx, camp.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range audit.Problems {
		probs.add("audit: %s", p)
	}
	if audit.ProblemCount > len(audit.Problems) {
		probs.add("audit: %d more problems", audit.ProblemCount-len(audit.Problems))
	}
	// Every user grabbed once (unless shed with ErrBusy), so min(users,
	// packets) of them got a packet.
	if want := int64(min(o.Users, o.Packets)); rs.busy == 0 && rs.granted != want {
		probs.add("%d GRANTED answers for %d users and %d packets", rs.granted, o.Users, o.Packets)
	}
	if rs.granted != audit.ClaimsCount || grantedCents != audit.ClaimsCents {
		probs.add("clients were told of %d grants, %d cents; the claims hash holds %d, %d cents",
			rs.granted, grantedCents, audit.ClaimsCount, audit.ClaimsCents)
	}
	// Nothing settles during a bench, so the stream holds every grant.
	if rs.granted != audit.StreamCount || grantedCents != audit.StreamCents {
		probs.add("clients were told of %d grants, %d cents; the grants stream holds %d, %d cents",
			rs.granted, grantedCents, audit.StreamCount, audit.StreamCents)
	}
	if got := grantedCents + audit.PoolCents + audit.Status.RefundedCents; got != o.Total {
		probs.add("conservation: told %d + pool %d + refunded %d = %d cents, total %d",
			grantedCents, audit.PoolCents, audit.Status.RefundedCents, got, o.Total)
	}
	rs.problems = probs.all()
	rs.peakRSSChecks = PeakRSSMB()
	return rs, nil
}
