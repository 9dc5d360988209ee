package cli

import (
	"context"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/leader"
)

// startScheduler starts the election of the scheduler: the holder of the
// lease runs the settlement worker, whose passes settle grants, close
// campaigns whose window ended and refund drained ones. (Opening needs no
// action: the scripts compare opens_at with the Redis clock.) Several
// workers would be safe too, by the consumer group and the ledger's
// idempotency; the lease keeps the work and the incidents in one place.
func (s *serveCmd) startScheduler(ctx context.Context) error {
	el, err := leader.New(leader.Config{
		Redis: s.conn.Client, Name: redisstore.SchedulerLease, TTL: s.f.leaseTTL, Logger: s.log,
		OnElected: s.schedule,
	})
	if err != nil {
		return usageErrorf("--lease-ttl: %v", err)
	}
	if err := el.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.elector = el
	s.deferClose(el.Stop)
	return nil
}

// schedule runs settlement while this process holds the lease. The
// worker's passes outlive the term: on a loss or a shutdown the pass in
// flight finishes (within the shutdown timeout), so neither leaves a
// half-done batch behind.
func (s *serveCmd) schedule(ctx context.Context, term leader.Term) {
	s.log.Info("scheduler lease acquired: running settlement", "consumer", s.consumer, "token", term.Token)
	s.leaseHeld.Set(1)
	if err := s.worker.Start(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("settlement did not start", "err", err)
	}
	<-ctx.Done()
	s.worker.StopAfterPass(s.f.shutdownTimeout)
	s.leaseHeld.Set(0)
	s.log.Info("scheduler lease released: settlement stopped after its current pass", "consumer", s.consumer)
}
