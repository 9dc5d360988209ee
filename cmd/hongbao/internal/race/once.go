package race

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/atomicop"
)

// OnceSide is what one approach got wrong in once.
type OnceSide struct {
	// Duplicates counts pushes beyond the first of each message, except
	// those caused by a worker dying after its push (counted apart).
	Duplicates int64 `json:"duplicates"`
	// Lost counts messages never pushed.
	Lost int64 `json:"lost"`
	// AfterPushDeaths counts workers that died after pushing and before
	// confirming (only with DieAfterPush).
	AfterPushDeaths *int64 `json:"after_push_deaths,omitempty"`
	// AfterPushDuplicates counts the duplicates those deaths caused, which
	// a receiver removes by message id (only with DieAfterPush).
	AfterPushDuplicates *int64 `json:"after_push_duplicates,omitempty"`
}

// workOrder returns the order in which the source hands out messages:
// rounds of --keys messages, each message --copies times, shuffled within
// the round, so several workers hold copies of one message at once.
func workOrder(cfg Config, messages int) []int32 {
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 2))
	order := make([]int32, 0, messages*cfg.Copies)
	for lo := 0; lo < messages; lo += cfg.Keys {
		start := len(order)
		for m := lo; m < min(lo+cfg.Keys, messages); m++ {
			for range cfg.Copies {
				order = append(order, int32(m))
			}
		}
		round := order[start:]
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
	}
	return order
}

// source hands copies of messages to workers and, like a queue with a
// visibility timeout, hands a copy out again when its worker died without
// acknowledging it.
type source struct {
	work       chan int32
	pending    sync.WaitGroup
	visibility time.Duration
}

func newSource(order []int32, visibility time.Duration) *source {
	s := &source{work: make(chan int32, len(order)), visibility: visibility}
	s.pending.Add(len(order))
	for _, m := range order {
		s.work <- m
	}
	go func() { s.pending.Wait(); close(s.work) }()
	return s
}

// ack acknowledges a copy: it is handled.
func (s *source) ack() { s.pending.Done() }

// redeliver hands the copy of a dead worker out again after the visibility
// timeout. The buffer holds every copy, so the send never blocks.
func (s *source) redeliver(m int32) {
	time.AfterFunc(s.visibility, func() { s.work <- m })
}

// receiver counts the pushes of each message, the workers that died
// after a push, and the pushes that such a death caused.
//
// A death after a push causes a second push only once the dead worker's
// lease has run out: until then nobody else can claim the message. So a
// push counts as caused by an earlier after-push death when it comes at
// least half a lease after it; a duplicate of the naive check-then-mark
// race comes within a round trip of the first push.
type receiver struct {
	start           time.Time
	caused          time.Duration
	pushes          []atomic.Int32
	afterPushDeaths []atomic.Int32
	firstDeathAt    []atomic.Int64 // ns since start, 0: none
	causedPushes    []atomic.Int32
}

func newReceiver(messages int, lease time.Duration) *receiver {
	return &receiver{
		start:           time.Now(),
		caused:          lease / 2,
		pushes:          make([]atomic.Int32, messages),
		afterPushDeaths: make([]atomic.Int32, messages),
		firstDeathAt:    make([]atomic.Int64, messages),
		causedPushes:    make([]atomic.Int32, messages),
	}
}

// push receives message m (with its id, and for hongbao its token).
func (r *receiver) push(m int32) {
	r.pushes[m].Add(1)
	if at := r.firstDeathAt[m].Load(); at > 0 && time.Since(r.start) >= time.Duration(at)+r.caused {
		r.causedPushes[m].Add(1)
	}
}

// diedAfterPush records that the worker that just pushed m died.
func (r *receiver) diedAfterPush(m int32) {
	r.afterPushDeaths[m].Add(1)
	r.firstDeathAt[m].CompareAndSwap(0, int64(max(1, time.Since(r.start))))
}

func (r *receiver) side(reportAfterPush bool) OnceSide {
	var s OnceSide
	var deaths, explained int64
	for m := range r.pushes {
		p, d := int64(r.pushes[m].Load()), int64(r.afterPushDeaths[m].Load())
		deaths += d
		if p == 0 {
			s.Lost++
			continue
		}
		// Each death causes at most one more push.
		e := min(p-1, d, int64(r.causedPushes[m].Load()))
		explained += e
		s.Duplicates += p - 1 - e
	}
	if reportAfterPush {
		s.AfterPushDeaths, s.AfterPushDuplicates = &deaths, &explained
	}
	return s
}

// Once runs both approaches at once over the same workload and counts
// their errors.
func Once(ctx context.Context, c rueidis.Client, prefix string, cfg Config) (naive, ours OnceSide, err error) {
	order := workOrder(cfg, cfg.Messages())
	once, err := atomicop.NewOnce(c, &atomicop.OnceConfig{Prefix: prefix + "hongbao:", FenceTTL: 10 * time.Minute})
	if err != nil {
		return naive, ours, err
	}
	naivePrefix := prefix + "naive:"
	// Redelivery comes a little after the lease, so a dead worker's claim
	// has run out when its copy comes back.
	visibility := cfg.Lease + cfg.Lease/10 + 10*time.Millisecond
	keep := 10 * time.Minute

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	recv := [2]*receiver{}
	var wg sync.WaitGroup
	for side := range 2 {
		r := newReceiver(cfg.Messages(), cfg.Lease)
		recv[side] = r
		src := newSource(order, visibility)
		for w := range cfg.Workers {
			rng := mrand.New(mrand.NewPCG(cfg.Seed, uint64(3+2*w+side)))
			wg.Go(func() {
				for m := range src.work {
					if rctx.Err() != nil {
						src.ack()
						continue
					}
					id := "m" + strconv.Itoa(int(m))
					var err error
					if side == 0 {
						err = naiveDeliver(rctx, c, naivePrefix+"pushed:"+id, m, src, r, rng, cfg)
					} else {
						err = onceDeliver(rctx, once, id, m, src, r, rng, cfg, keep)
					}
					if err != nil {
						fail.set(err)
					}
				}
			})
		}
	}
	wg.Wait()
	if fail.err != nil {
		return naive, ours, fmt.Errorf("once: %w", fail.err)
	}
	if err := ctx.Err(); err != nil {
		return naive, ours, err
	}
	return recv[0].side(cfg.DieAfterPush > 0), recv[1].side(cfg.DieAfterPush > 0), nil
}

// naiveDeliver is once-only delivery as usually first written: check
// the mark, set it, push. A worker that dies between the mark and the push
// loses the message; two workers that both check before either marks both
// push it.
func naiveDeliver(ctx context.Context, c rueidis.Client, mark string, m int32, src *source, r *receiver, rng *mrand.Rand, cfg Config) error {
	err := c.Do(ctx, c.B().Get().Key(mark).Build()).Error()
	if err == nil {
		src.ack() // already pushed, as far as the mark says
		return nil
	}
	if !rueidis.IsRedisNil(err) {
		src.ack()
		return err
	}
	if err := c.Do(ctx, c.B().Set().Key(mark).Value("1").Build()).Error(); err != nil {
		src.ack()
		return err
	}
	if rng.Float64() < cfg.Die {
		src.redeliver(m)
		return nil
	}
	r.push(m)
	if rng.Float64() < cfg.DieAfterPush {
		r.diedAfterPush(m)
		src.redeliver(m)
		return nil
	}
	src.ack()
	return nil
}

// onceDeliver is hongbao's way: claim, push with id and token, confirm.
// A worker told Busy acknowledges its copy: the holder's copy comes back
// if the holder dies.
func onceDeliver(ctx context.Context, once *atomicop.Once, id string, m int32, src *source, r *receiver, rng *mrand.Rand, cfg Config, keep time.Duration) error {
	cl, err := once.Claim(ctx, id, cfg.Lease)
	if err != nil {
		src.ack()
		return err
	}
	if cl.Status != atomicop.Claimed {
		src.ack()
		return nil
	}
	if rng.Float64() < cfg.Die {
		src.redeliver(m)
		return nil
	}
	r.push(m) // the push carries id and cl.Token
	if rng.Float64() < cfg.DieAfterPush {
		r.diedAfterPush(m)
		src.redeliver(m)
		return nil
	}
	err = once.Done(ctx, id, cl.Token, keep)
	src.ack()
	if errors.Is(err, atomicop.ErrNotOwner) {
		// The lease ran out and another worker claimed: a duplicate the
		// receiver will count. Not a failure of the run.
		return nil
	}
	return err
}
