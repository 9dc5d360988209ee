package bench

import (
	"context"
	"errors"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// runEngine runs one engine measurement: Create loads the campaign (the
// same spec and seed, so the same packets as the classic pool), then
// Concurrency goroutines each grab once for every user of their share.
func runEngine(ctx context.Context, t *target, o Options, amounts []int64, label string) (*runStats, error) {
	id := "bench-" + t.runID
	keys := redisstore.Default.CampaignKeys(id)
	if t.shared {
		defer func() {
			t.drop(keys.Meta, keys.Pool, keys.Claims, keys.Grants, keys.Dead, keys.Staging, keys.Blocked)
			c := t.client
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Do(cctx, c.B().Zrem().Key(redisstore.Default.Index(redisstore.RedPacket)).Member(id).Build()).Error()
		}()
	}
	eng, camp, err := loadEngine(ctx, t, o, id)
	if err != nil {
		return nil, err
	}
	rs := &runStats{}
	if rs.pooledBytes, err = t.memoryUsage(ctx, keys.Pool); err != nil {
		return nil, err
	}

	p := newPhase(o, amounts, label, int64(o.Users))
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.abort = cancel
	p.spawn(func(w, from, to int) { p.engineWorker(gctx, eng, camp.ID, w, from, to) })
	if err := p.measure(ctx, t, rs); err != nil {
		return nil, err
	}
	grantedCents := p.tally(rs)
	st := eng.Stats()
	rs.batches, rs.carried = st.Batches, st.Grabs
	rs.transfers, rs.moved = st.Transfers, st.Moved
	for _, b := range st.BatchSizes {
		rs.sizes = append(rs.sizes, BatchBucket{Max: b.Max, Count: b.Count})
	}
	if rs.grantBytes, err = t.memoryUsage(ctx, keys.Claims, keys.Grants); err != nil {
		return nil, err
	}
	if err := checkEngine(ctx, eng, camp.ID, o, rs, grantedCents, &p.probs); err != nil {
		return nil, err
	}
	rs.problems = p.probs.all()
	rs.peakRSSChecks = PeakRSSMB()
	return rs, nil
}

// loadEngine creates the campaign id from the options' spec and seed.
func loadEngine(ctx context.Context, t *target, o Options, id string) (*hongbao.Engine, *hongbao.Campaign, error) {
	load := o.progress("loading", int64(o.Packets))
	defer load.Done()
	eng, err := hongbao.New(hongbao.Config{
		Redis:        t.client,
		MaxBatch:     o.MaxBatch,
		WaitReplicas: o.WaitReplicas,
		WaitTimeout:  o.WaitTimeout,
		LoadProgress: func(n, _ int) { load.Set(int64(n)) },
		// A benchmark of Redis alone: nothing is settled or rebuilt.
		WithoutLedger: true,
	})
	if err != nil {
		return nil, nil, err
	}
	seed := o.Seed
	camp, err := eng.Create(ctx, hongbao.Spec{ID: id, Total: o.Total, Count: o.Packets, Split: o.Split, Seed: &seed, Shards: o.Shards})
	return eng, camp, err
}

// maxUnknownRetries bounds the retries of one user's grab whose outcome
// was unknown.
const maxUnknownRetries = 10

// engineWorker is worker w: it grabs once for each user in [from, to).
func (p *phase) engineWorker(ctx context.Context, eng *hongbao.Engine, id string, w, from, to int) {
	lat, n := &p.lats[w], &p.counts[w]
	tk := ticker{bar: p.bar}
	defer tk.flush()
	for u := from; u < to; u++ {
		t0 := time.Now()
		g, err := eng.Grab(ctx, id, p.o.user(u))
		for try := 0; errors.Is(err, hongbao.ErrOutcomeUnknown) && try < maxUnknownRetries && ctx.Err() == nil; try++ {
			// A WAIT that timed out: the grant may stand. The retry answers
			// ALREADY with it, which is this user's grant, or grants afresh.
			n.unknown++
			if g, err = eng.Grab(ctx, id, p.o.user(u)); err == nil && g.Outcome == hongbao.Already {
				g.Outcome = hongbao.Granted
			}
		}
		lat.add(time.Since(t0))
		if errors.Is(err, hongbao.ErrBusy) {
			n.busy++
			n.grabs++
			continue
		}
		if err != nil {
			p.fail(err)
			return
		}
		n.grabs++
		switch g.Outcome {
		case hongbao.Granted:
			n.granted++
			n.cents += g.Cents
			p.granted(u, g.User, g.Seq, g.Cents, "granted")
		case hongbao.SoldOut:
			n.soldOut++
		default:
			p.probs.add("user %s was answered %s", g.User, g.Outcome)
		}
		tk.tick()
	}
}

// checkEngine checks the invariants: the engine's own audit of the Redis
// contents, then what the clients were told against it.
func checkEngine(ctx context.Context, eng *hongbao.Engine, id string, o Options, rs *runStats, grantedCents int64, probs *problems) error {
	audit, err := eng.Audit(ctx, id)
	if err != nil {
		return err
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
	return nil
}
