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
	// resigned is set when the call released the token the loop gave up
	// (loop.resign) before it claimed.
	resigned bool
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
	// stale hears from the work's goroutine that Config.Fence refused a
	// term's token. resign is then the token given up, to release before
	// the next claim, and floor the token recorded, which every claim
	// from then on draws above.
	stale         chan StaleTokenError
	resign, floor int64
}

func newLoop(e *Elector) *loop {
	return &loop{e: e, cfg: e.cfg, log: e.log, answers: make(chan answer, 1), stale: make(chan StaleTokenError, 1)}
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
		case s := <-l.stale:
			l.refused(s)
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
	token, resign, floor := l.token, l.resign, l.floor
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.cfg.RenewEvery, l.cfg.TTL/5))
		defer cancel()
		a := answer{sent: time.Now(), extend: token != 0, token: token}
		if resign != 0 {
			// A lease that is no longer this token's needs no release.
			if err := l.e.once.Release(cctx, l.cfg.Name, resign); err != nil && !errors.Is(err, atomicop.ErrNotOwner) {
				a.err = err
				l.answers <- a
				return
			}
			a.resigned = true
		}
		if a.extend {
			a.err = l.e.once.Extend(cctx, l.cfg.Name, token, l.cfg.TTL)
		} else {
			a.claim, a.err = l.e.once.ClaimAbove(cctx, l.cfg.Name, l.cfg.TTL, floor)
			if a.err == nil && a.claim.Status == atomicop.Busy {
				a.holder, _ = l.e.Holder(cctx)
			}
		}
		l.answers <- a
	}()
}

// handle acts on an answer and schedules the next call.
func (l *loop) handle(ctx context.Context, a answer) {
	if a.resigned {
		l.resign = 0
	}
	switch {
	case a.extend && a.token != l.token:
		// The renewal of a token given up meanwhile (refused): the next
		// call releases it and claims anew.
		l.after(l.cfg.RenewEvery)
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
	l.e.setLeading(true, until, l.token)
	l.e.writeNote(ctx, l.token)
	l.after(sent.Add(l.cfg.RenewEvery).Sub(now))
	if l.leading {
		return
	}
	l.leading = true
	l.log.Info("elected", "token", l.token)
	proven := l.e.isProven(l.token)
	if proven && l.cfg.OnElected == nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.stopWork, l.workDone = cancel, done
	term := Term{Token: l.token, Since: now}
	go func() {
		defer close(done)
		if !proven && !l.prove(wctx, term) {
			return
		}
		if l.cfg.OnElected != nil {
			l.cfg.OnElected(wctx, term)
		}
	}()
}

// prove asks Config.Fence to accept term's token, again every RenewEvery
// while it cannot answer, until ctx ends. It reports whether the token is
// proven; a refusal goes to the loop (refused), which gives the lease up.
// It runs in the work's goroutine: the work starts only after it.
func (l *loop) prove(ctx context.Context, term Term) bool {
	var retry *time.Timer
	for warned := false; ; warned = true {
		err := l.cfg.Fence(ctx, term)
		var stale *StaleTokenError
		switch {
		case err == nil:
			l.e.setProven(term.Token)
			if warned {
				l.log.Info("fencing token proven; the work starts", "token", term.Token)
			}
			return true
		case errors.As(err, &stale):
			s := StaleTokenError{Token: term.Token, Recorded: max(stale.Recorded, term.Token)}
			l.log.Error("REFUSED: the fencing token is not above the one recorded: the lease was handed out again under a token used before (a token counter lost in Redis and a clock behind); the work does not run, and the lease is taken again above the recorded token",
				"token", term.Token, "recorded", stale.Recorded)
			select {
			case l.stale <- s:
			case <-ctx.Done():
			}
			return false
		case ctx.Err() != nil:
			return false
		}
		if !warned {
			l.log.Warn("cannot prove the fencing token; the work waits, and it is asked again every renewal", "token", term.Token, "err", err)
		}
		if retry == nil {
			retry = time.NewTimer(l.cfg.RenewEvery)
			defer retry.Stop()
		} else {
			retry.Reset(l.cfg.RenewEvery)
		}
		select {
		case <-ctx.Done():
			return false
		case <-retry.C:
		}
	}
}

// refused gives up a term whose token Config.Fence refused: leadership
// ends, and the next call, after RenewEvery, releases the lease and
// claims it again above the recorded token. A report of a term already
// over changes nothing.
func (l *loop) refused(s StaleTokenError) {
	if !l.leading || s.Token != l.token {
		return
	}
	l.lose(slog.LevelWarn, "the fencing token was refused")
	l.resign, l.token = l.token, 0
	l.floor = max(l.floor, s.Recorded)
	if !l.inFlight {
		l.after(l.cfg.RenewEvery)
	}
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
	l.e.setLeading(false, time.Time{}, 0)
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
		if a.resigned {
			l.resign = 0
		}
		switch {
		case a.extend && a.token != l.token:
		case errors.Is(a.err, atomicop.ErrNotOwner):
			l.token = 0
		case a.err == nil && !a.extend && a.claim.Status == atomicop.Claimed:
			l.token = a.claim.Token
		}
	}
	if l.token == 0 {
		// A token given up and not released yet may still hold the lease.
		l.token = l.resign
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
