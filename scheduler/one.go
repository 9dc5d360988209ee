package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hongbao/hongbao/leader"
)

// A scheduler of one part elects one holder of the deployment's single
// lease (<LeaseName>), and announces itself in the parts hash every round
// (LeaseTTL/3, parts.lua) as a process of one part, as processes of
// several parts announce themselves. So every settling process refuses a
// different number of parts the same way, whatever its own number, whether
// it holds a lease and whether it drains: at its start a live process
// counting another number refuses it (ErrParts; nothing is settled), and
// a process that finds one later (it came in while the lease changed
// hands and nobody held the mark, or it runs an older build) lets its
// lease (its parts) go and settles nothing until every live process
// agrees. Without the announcement, a process of several parts saw one of
// one part only while it held the lease, and a drain of one part was seen
// by nobody and checked nothing.

// onePart announces a scheduler of one part and runs its elector while no
// live process counts another number of parts.
type onePart struct {
	s      *Scheduler
	member string
	every  time.Duration // a round
	life   time.Duration // of an announcement

	mu      sync.Mutex
	el      *leader.Elector // nil while refused or stopped
	elCtx   context.Context // what a new elector runs under
	halted  bool            // Stop: no elector until Start again
	refused bool            // the loop's own
}

func newOnePart(s *Scheduler, member string) *onePart {
	every := s.cfg.LeaseTTL / 3
	return &onePart{s: s, member: member, every: every, life: 2 * every}
}

// round announces this process. Refused, it stops the elector (the lease
// is let go at once); agreed with, it makes sure the elector runs when
// elect is set (a drain takes no lease). Any other failure keeps the state
// as it is, and starts the elector when elect is set and this process was
// not refused: Redis not answering yet is the elector's to retry.
func (o *onePart) round(ctx context.Context, elect bool) error {
	s := o.s
	_, err := announce(ctx, s.cfg.Settle.Redis, s.ns.LeasePrefix(), s.cfg.LeaseName, o.member, 1, o.life, nil)
	if errors.Is(err, ErrParts) {
		if !o.refused {
			s.log.Error("REFUSED: "+err.Error()+"; this process lets the lease go and settles nothing until every process agrees", "parts", 1)
		}
		o.refused = true
		o.stopElector()
		return err
	}
	if err == nil && o.refused {
		s.log.Info("settlement: no disagreeing process is live any more; asking for the lease again")
		o.refused = false
	}
	if elect && !o.refused {
		o.startElector()
	}
	return err
}

// run does a round every o.every until ctx ends, then lets the lease go
// and withdraws the announcement.
func (o *onePart) run(ctx context.Context) {
	t := time.NewTimer(o.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			o.halt()
			withdraw(o.s, o.member)
			return
		case <-t.C:
		}
		if err := o.round(ctx, true); err != nil && !errors.Is(err, ErrParts) && ctx.Err() == nil {
			o.s.log.Warn("settlement: announcing this process failed; the lease is kept while it renews", "err", err)
		}
		t.Reset(o.every)
	}
}

// drain announces a drain (which takes no lease) every round until ctx
// ends, and calls refuse when a live process counts another number of
// parts.
func (o *onePart) drain(ctx context.Context, refuse func(error)) {
	t := time.NewTimer(o.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := o.round(ctx, false); errors.Is(err, ErrParts) {
			refuse(err)
			return
		}
		t.Reset(o.every)
	}
}

// start lets electors run again, under ctx (Start).
func (o *onePart) start(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.halted, o.elCtx, o.refused = false, ctx, false
}

// startElector starts an elector when none runs.
func (o *onePart) startElector() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.el != nil || o.halted || o.elCtx == nil {
		return
	}
	s := o.s
	el, err := leader.New(leader.Config{
		Redis: s.cfg.Settle.Redis, Prefix: s.ns.LeasePrefix(), Name: s.cfg.LeaseName, TTL: s.cfg.LeaseTTL, Logger: s.cfg.Logger, OnElected: s.lease,
		Fence: s.fence(s.cfg.LeaseName),
		// Named as the settlement consumer (by default the host), so that
		// a process waiting for the lease says whom it waits for.
		ID: s.cfg.Settle.Consumer,
	})
	if err == nil {
		err = el.Start(o.elCtx)
	}
	if err != nil { // New checked the configuration
		s.log.Error("scheduler: cannot ask for the lease", "err", err)
		return
	}
	o.el = el
}

// stopElector stops the elector, which lets the lease go.
func (o *onePart) stopElector() {
	o.mu.Lock()
	el := o.el
	o.el = nil
	o.mu.Unlock()
	if el != nil {
		el.Stop()
	}
}

// halt stops the elector for good (Stop), so that no round starts another.
func (o *onePart) halt() {
	o.mu.Lock()
	o.halted = true
	o.mu.Unlock()
	o.stopElector()
}

// isLeader says whether this process holds the lease now.
func (o *onePart) isLeader() bool {
	o.mu.Lock()
	el := o.el
	o.mu.Unlock()
	return el != nil && el.IsLeader()
}

// withdraw deletes member's announcement, so that the others see it gone
// at their next round rather than when it expires.
func withdraw(s *Scheduler, member string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc := s.cfg.Settle.Redis
	if err := rc.Do(ctx, rc.B().Hdel().Key(partsKeys(s.ns.LeasePrefix(), s.cfg.LeaseName)[0]).Field(member).Build()).Error(); err != nil {
		s.log.Warn("settlement: cannot withdraw this process's announcement; it runs out by itself", "err", err)
	}
}
