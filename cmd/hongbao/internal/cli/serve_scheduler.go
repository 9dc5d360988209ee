package cli

import (
	"context"
	"time"

	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

// newScheduler makes the scheduler of serve: the holder of the lease runs
// the settlement worker, whose passes settle grants, close campaigns whose
// window ended and refund drained ones, and the discount reaper. (Opening
// needs no action: the scripts compare opens_at with the Redis clock.)
// Several workers would be safe too, by the consumer group and the
// ledger's idempotency; the lease keeps the work and the incidents in one
// place.
func (s *serveCmd) newScheduler() error {
	f := &s.f
	sched, err := scheduler.New(scheduler.Config{
		Settle: settle.Config{Redis: s.conn.Client, Namespace: f.redis.ns, Ledger: s.led, Consumer: s.consumer,
			WaitReplicas: f.waitReplicas, WaitTimeout: f.waitTimeout, Tracer: s.tracer, DrawDataRetention: f.drawLogRetention},
		Engine: s.eng, LeaseTTL: f.leaseTTL, Parts: f.settleParts, ReapEvery: f.reapEvery, StopGrace: f.shutdownTimeout,
		MaxBacklog: f.maxBacklog, Logger: s.log.With("consumer", s.consumer),
	})
	if err != nil {
		return usageErrorf("%v", err)
	}
	s.sched = sched
	return nil
}

// startScheduler joins the election. With --settle=false it only
// publishes the engine's grants, so that the scheduler running elsewhere
// (hongbao settle) settles them at once, and applies --max-backlog.
func (s *serveCmd) startScheduler(ctx context.Context) error {
	if s.sched == nil {
		pub := scheduler.Publish(s.conn.Client, s.eng)
		s.deferClose(pub.Stop)
		if s.f.maxBacklog > 0 {
			bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan struct{})
			go func() {
				defer close(done)
				scheduler.BoundBacklog(bctx, s.conn.Client, s.eng, s.f.maxBacklog, time.Second, s.log)
			}()
			s.deferClose(func() { cancel(); <-done })
		}
		return nil
	}
	if err := s.sched.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.deferClose(s.sched.Stop)
	return nil
}
