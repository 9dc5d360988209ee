package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hongbao/hongbao/atomicop"
)

// answer is what one Redis call of the loop learned.
type answer struct {
	// sent is when the call was sent: a lease it took or renewed runs in
	// Redis from no earlier than this, whatever the reply's delay.
	sent   time.Time
	extend bool           // an Extend of token, else a Claim
	token  int64          // the token extended
	claim  atomicop.Claim // the Claim's answer
	err    error
	// holder is who holds the lease when the Claim found it Busy, as far
	// as a read after it could tell (the zero Holder when it could not).
	holder Holder
}

// loop is the state of a started Elector, owned by one goroutine. Redis
// calls run in goroutines of their own, one at a time, and report on
// answers, so a stalled call never keeps the loop from giving up the
// lease on time.
type loop struct {
	e       *Elector
	cfg     Config
	log     *slog.Logger
	answers chan answer
	// inFlight is set while a call runs.
	inFlight bool
	// token may hold the lease: ours while leading, and kept after a loss
	// whose cause is unknown (a renewal that timed out may still have
	// renewed), so the next try renews it before claiming anew.
	token int64
	// leading is set from an election to its loss; until is the local
	// end of the lease then, which deadline fires at.
	leading  bool
	until    time.Time
	deadline *time.Timer
	next     *time.Timer // the next call
	// stopWork cancels the running OnElected; workDone closes when it
	// returns.
	stopWork context.CancelFunc
	workDone chan struct{}
	// waitingFor is the token of the holding this process last said it
	// waits for, so that it says so once per holding; unnamed the token
	// of a holding seen once without its note.
	waitingFor, unnamed int64
}

func newLoop(e *Elector) *loop {
	return &loop{e: e, cfg: e.cfg, log: e.log, answers: make(chan answer, 1)}
}

// run takes and holds the lease until ctx ends, then lets it go.
func (l *loop) run(ctx context.Context) {
	l.next = time.NewTimer(0)
	defer l.next.Stop()
	l.deadline = time.NewTimer(time.Hour)
	l.deadline.Stop()
	defer l.deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stop(ctx)
			return
		case <-l.next.C:
			l.send(ctx)
		case a := <-l.answers:
			l.inFlight = false
			l.handle(ctx, a)
		case <-l.deadline.C:
			// The token is kept: the renewal in flight may yet succeed.
			l.lose(slog.LevelWarn, "no renewal succeeded in time; the lease may run out in Redis")
		}
	}
}

// send starts the next call: a renewal of the token that may hold the
// lease, else a claim. The call is bounded by the longer of RenewEvery and
// a fifth of TTL, and not by ctx: a stop waits for it, to learn whether
// there is a lease to release. A bound as short as a small RenewEvery
// would cut off claims that Redis runs but answers late on a busy
// machine: such a claim takes the lease without the claimer knowing its
// token, and the lease then waits out its TTL. Giving up leadership on
// time does not depend on the bound: the deadline timer does it.
func (l *loop) send(ctx context.Context) {
	l.inFlight = true
	token := l.token
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.cfg.RenewEvery, l.cfg.TTL/5))
		defer cancel()
		a := answer{sent: time.Now(), extend: token != 0, token: token}
		if a.extend {
			a.err = l.e.once.Extend(cctx, l.cfg.Name, token, l.cfg.TTL)
		} else {
			a.claim, a.err = l.e.once.Claim(cctx, l.cfg.Name, l.cfg.TTL)
			if a.err == nil && a.claim.Status == atomicop.Busy {
				a.holder, _ = l.e.Holder(cctx)
			}
		}
		l.answers <- a
	}()
}

// handle acts on an answer and schedules the next call.
func (l *loop) handle(ctx context.Context, a answer) {
	switch {
	case errors.Is(a.err, atomicop.ErrNotOwner):
		l.token = 0
		l.lose(slog.LevelWarn, "the lease ran out and another process took it")
		l.after(0)
	case a.err != nil:
		l.failed(a)
	case a.extend:
		l.renewed(ctx, a.sent)
	case a.claim.Status == atomicop.Claimed:
		l.token = a.claim.Token
		l.renewed(ctx, a.sent)
	case a.claim.Status == atomicop.Busy:
		l.waiting(a.holder)
		// Try again soon after the holder's lease would run out, and
		// at least every RenewEvery in case it is released.
		l.after(min(a.claim.TTL+time.Millisecond, l.cfg.RenewEvery))
	default:
		l.log.Error("the lease's mark says delivered: something other than an Elector wrote it",
			"status", a.claim.Status, "ttl", a.claim.TTL)
		l.after(l.cfg.RenewEvery)
	}
}

// failed schedules the next call after a Redis error. While the lease may
// be ours, the renewal is tried again sooner, to get through before the
// deadline.
func (l *loop) failed(a answer) {
	if l.token == 0 {
		l.log.Debug("cannot ask Redis for the lease", "err", a.err)
		l.after(l.cfg.RenewEvery)
		return
	}
	if l.leading {
		l.log.Warn("cannot renew the lease", "err", a.err, "gives_up_in", time.Until(l.until).Round(time.Millisecond))
	}
	l.after(max(l.cfg.RenewEvery/4, time.Millisecond))
}

// renewed records a lease taken or renewed by a call sent at sent, and
// becomes the leader if it was not.
func (l *loop) renewed(ctx context.Context, sent time.Time) {
	// Redis keeps the lease TTL from when it ran the call, no earlier than
	// sent; giving up a fifth of TTL before leaves the work time to stop.
	until := sent.Add(l.cfg.TTL / 5 * 4)
	now := time.Now()
	if !now.Before(until) {
		// An answer too late to act on; renew again at once.
		l.after(0)
		return
	}
	l.until = until
	l.deadline.Reset(until.Sub(now))
	l.e.setLeading(true, until)
	l.e.writeNote(ctx, l.token)
	l.after(sent.Add(l.cfg.RenewEvery).Sub(now))
	if l.leading {
		return
	}
	l.leading = true
	l.log.Info("elected", "token", l.token)
	if l.cfg.OnElected == nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.stopWork, l.workDone = cancel, done
	term := Term{Token: l.token, Since: now}
	go func() {
		defer close(done)
		l.cfg.OnElected(wctx, term)
	}()
}

// waiting says, once per holding, that another process holds the lease
// and whom this one waits for. A holding found without its note (its
// holder had just taken it) is named at the next try.
func (l *loop) waiting(h Holder) {
	if h.Token == 0 || h.Token == l.waitingFor {
		return
	}
	holder := h.ID
	if holder == "" {
		if l.unnamed != h.Token {
			l.unnamed = h.Token
			return
		}
		holder = "unknown (a holder that writes no note)"
	}
	l.waitingFor = h.Token
	l.log.Info("waiting for the lease: another process holds it", "holder", holder, "holder_token", h.Token,
		"expires_in", h.TTL.Round(time.Millisecond), "self", l.cfg.ID)
}

// lose gives up leadership, if held: IsLeader turns false, OnElected's
// context is cancelled, and lose waits for it to return.
func (l *loop) lose(level slog.Level, why string) {
	if !l.leading {
		return
	}
	l.leading = false
	l.e.setLeading(false, time.Time{})
	l.deadline.Stop()
	l.log.Log(context.Background(), level, "leadership ends: "+why, "token", l.token)
	if l.stopWork != nil {
		l.stopWork()
		<-l.workDone
		l.stopWork, l.workDone = nil, nil
	}
}

// stop ends leadership, waits for the call in flight, and releases the
// lease when it may be ours: another process then takes over at its next
// try instead of after the TTL. A release of a lease that is no longer
// ours changes nothing (the token is checked in Redis).
func (l *loop) stop(ctx context.Context) {
	l.lose(slog.LevelInfo, "the elector stops and releases the lease")
	if l.inFlight {
		a := <-l.answers
		switch {
		case errors.Is(a.err, atomicop.ErrNotOwner):
			l.token = 0
		case a.err == nil && !a.extend && a.claim.Status == atomicop.Claimed:
			l.token = a.claim.Token
		}
	}
	if l.token == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.e.once.Release(rctx, l.cfg.Name, l.token); err != nil && !errors.Is(err, atomicop.ErrNotOwner) {
		l.log.Warn("cannot release the lease; another process takes over when it runs out", "err", err)
	}
}

// after schedules the next call in d.
func (l *loop) after(d time.Duration) { l.next.Reset(max(d, 0)) }
