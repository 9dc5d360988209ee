package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// WakeChannel is the Redis pub/sub channel on which engines of namespace
// ns tell the scheduler, wherever it runs, that they granted: the
// scheduler then settles at once instead of at its next idle poll. It is
// "<ns>:settle:wake" ("hb:settle:wake" in the default namespace).
func WakeChannel(ns string) string {
	n, _ := redisstore.ParseNamespace(ns)
	return n.WakeChannel()
}

// wakeGap is the least time between two wake messages of one process: a
// busy engine publishes at most 1/wakeGap a second, whatever its grab
// rate, and a grant waits at most wakeGap for its message.
const wakeGap = 20 * time.Millisecond

// Publisher tells the scheduler about an engine's grants and confirmed
// discounts by WakeChannel: one PUBLISH after a grant, then at most one
// per 20ms while grants go on, from a goroutine of its own (a grab never
// waits for it). It is one of the engine's observers (hongbao.Observer),
// beside the metrics and any of the embedder's own. A Scheduler with an
// Engine runs one; a process that serves grabs without a scheduler (serve
// --settle=false) runs its own, so that the scheduler elsewhere settles
// its grants at once. A lost message costs only time: the scheduler also
// polls.
type Publisher struct {
	hongbao.NopObserver
	rc      rueidis.Client
	channel string
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	remove  func() // takes the Publisher out of the engine's observers
	once    sync.Once
}

// Publish starts a Publisher of eng's grants on rc, on the wake channel of
// eng's namespace, as an observer of eng (Engine.Observe): the engine's
// other observers stay. Stop ends it.
func Publish(rc rueidis.Client, eng *hongbao.Engine) *Publisher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{rc: rc, channel: WakeChannel(eng.Namespace()), kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	p.remove = eng.Observe(p)
	go p.run(ctx)
	return p
}

// ObserveGrab kicks after a grab that granted a packet.
func (p *Publisher) ObserveGrab(ev hongbao.GrabEvent) {
	if ev.Err == nil && ev.Grant.Outcome == hongbao.Granted {
		p.Kick()
	}
}

// ObserveDiscount kicks after a confirm that made a discount final: it
// settles into the ledger as a grant does.
func (p *Publisher) ObserveDiscount(ev hongbao.DiscountEvent) {
	if ev.Op == hongbao.OpConfirm && ev.Err == nil && !ev.Reservation.Again {
		p.Kick()
	}
}

// Kick asks for a wake message; it never blocks.
func (p *Publisher) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		// A failed publish is not retried: the scheduler's poll settles
		// the grant a little later.
		_ = p.rc.Do(ctx, p.rc.B().Publish().Channel(p.channel).Message("1").Build()).Error()
		t := time.NewTimer(wakeGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Stop takes the Publisher out of the engine's observers, ends it and
// waits for it.
func (p *Publisher) Stop() {
	p.once.Do(func() {
		p.remove()
		p.cancel()
		<-p.done
	})
}

// listen wakes the worker on each message of the namespace's wake channel until ctx ends,
// subscribing again after a lost connection.
func (s *Scheduler) listen(ctx context.Context) {
	rc := s.cfg.Settle.Redis
	for ctx.Err() == nil {
		err := rc.Receive(ctx, rc.B().Subscribe().Channel(s.ns.WakeChannel()).Build(), func(rueidis.PubSubMessage) {
			s.worker.Wake()
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("wake channel: subscription lost; settlement polls meanwhile", "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
