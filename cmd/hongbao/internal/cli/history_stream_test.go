package cli

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/history"
	"github.com/hongbao/hongbao/internal/openapitest"
)

// The gateway's streams of TestHistoryUnderFaults: two gateway clients,
// one speaking gRPC and one Connect, each keep a GrabStream on every
// serve for the whole workload (a lane each). A lane sends its users'
// grabs as they come, several in flight, and records each grab from its
// send to its result. When a stream breaks (its serve was SIGKILLed),
// every grab sent on it without a result is unknown; the lane opens
// another stream (on the other serve while its own is down) and sends
// those users again, and a retried grab answers already_granted with the
// same packet.

const (
	// laneInFlight bounds the grabs a lane holds sent and unanswered.
	laneInFlight = 16
	// laneAway is how long a lane keeps a stream on a serve that is not
	// its own before it closes it and goes back, so that each serve has
	// streams open when the nemesis kills it.
	laneAway = 500 * time.Millisecond
	// lanePatience is how long a user's grab is sent again, as the other
	// clients' patience.
	lanePatience = 10 * time.Second
)

// streamLane is one of a gateway client's streams, homed on one serve.
type streamLane struct {
	h      *histRun
	client int
	home   int
	rpc    []hongbaov1connect.GrabServiceClient // one per serve
	in     <-chan string                        // users to grab; nil once closed

	mu    sync.Mutex
	ref   uint64
	retry []laneGrab
	live  *laneSession // the stream on its home serve, once it answered
}

// laneGrab is a user to grab and when the lane first sent it.
type laneGrab struct {
	user  string
	since time.Time
}

// sentGrab is a grab in flight on a stream.
type sentGrab struct {
	laneGrab
	start time.Duration
}

// laneSession is one stream of a lane, from open to end.
type laneSession struct {
	serve    int
	st       *connect.BidiStreamForClient[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse]
	cancel   context.CancelFunc
	named    bool // the campaign was sent
	pending  map[uint64]sentGrab
	over     bool          // the stream ended: no more pending
	answered bool          // some result came
	dead     chan struct{} // closed when the receiver returned
	err      error         // why it ended; nil for the end of a closed stream
}

// streams starts the gateway's stream clients on wg: they grab the users
// of in, then random users until nemesisDone.
func (h *histRun) streams(cfg histConfig, in <-chan int, nemesisDone <-chan struct{}, wg *sync.WaitGroup) {
	users := make(chan string)
	wg.Go(func() {
		defer close(users)
		for u := range in {
			users <- "h" + strconv.Itoa(u)
		}
		for {
			select {
			case users <- "h" + strconv.Itoa(rand.IntN(cfg.users)):
			case <-nemesisDone:
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	for g := range 2 {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		h.t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: openapitest.Transport(h.t, tr)}
		var opts []connect.ClientOption
		if g == 0 {
			opts = append(opts, connect.WithGRPC())
		}
		var rpc []hongbaov1connect.GrabServiceClient
		for _, p := range h.serves {
			rpc = append(rpc, hongbaov1connect.NewGrabServiceClient(hc, p.URL, opts...))
		}
		for s := range h.serves {
			l := &streamLane{h: h, client: cfg.workers + 2 + g, home: s, rpc: rpc, in: users}
			h.lanes = append(h.lanes, l)
			wg.Go(l.run)
		}
	}
}

// streamOpenOn waits up to 15 s until a lane homed on serve i has a
// stream there that answered, so that killing serve i breaks a stream;
// for up to 3 s of them, until such a stream has grabs in flight too, so
// that they most likely are when it breaks.
func (h *histRun) streamOpenOn(i int) {
	open := func(inFlight int) func() bool {
		return func() bool {
			for _, l := range h.lanes {
				l.mu.Lock()
				ss := l.live
				ok := ss != nil && l.home == i && len(ss.pending) >= inFlight
				l.mu.Unlock()
				if ok {
					return true
				}
			}
			return false
		}
	}
	if !eventually(3*time.Second, open(1)) {
		eventually(12*time.Second, open(0))
	}
}

// run opens one stream after another until the lane's users ran out and
// every grab has its answer (or patience ran out).
func (l *streamLane) run() {
	next := l.home
	for {
		ss, done := l.session(next)
		if done {
			return
		}
		next = l.home
		if ss.err != nil {
			// Its serve is down, or went down: the other one, for now.
			next = (ss.serve + 1) % len(l.rpc)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// session runs one stream on serve until it ends: it broke, or the lane
// closed it (to go home, or because it is done: done true).
func (l *streamLane) session(serve int) (*laneSession, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss := &laneSession{serve: serve, cancel: cancel, pending: map[uint64]sentGrab{}, dead: make(chan struct{})}
	ss.st = l.rpc[serve].GrabStream(ctx)
	ss.st.RequestHeader().Set("Authorization", "Bearer "+l.h.gw)
	go l.receive(ss)
	opened := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastRetry time.Time
	closing, ending := false, false
	for {
		var src <-chan string
		if !closing && l.in != nil && l.inFlight(ss) < laneInFlight {
			src = l.in
		}
		select {
		case <-ss.dead:
			_ = ss.st.CloseRequest()
			_ = ss.st.CloseResponse()
			return ss, ending && ss.err == nil && l.retries() == 0
		case u, ok := <-src:
			if !ok {
				l.in = nil
				continue
			}
			l.send(ss, []laneGrab{{user: u, since: time.Now()}})
		case <-tick.C:
		}
		if closing {
			continue
		}
		if time.Since(lastRetry) >= 20*time.Millisecond {
			if again := l.takeRetries(laneInFlight - l.inFlight(ss)); len(again) > 0 {
				lastRetry = time.Now()
				l.send(ss, again)
			}
		}
		ending = l.in == nil && l.retries() == 0 && l.inFlight(ss) == 0
		if ending || serve != l.home && time.Since(opened) > laneAway {
			// The receiver reads the rest, until the end of the stream.
			closing = true
			l.mu.Lock()
			l.live = nil
			l.mu.Unlock()
			if err := ss.st.CloseRequest(); err != nil {
				ss.cancel()
			}
		}
	}
}

func (l *streamLane) inFlight(ss *laneSession) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(ss.pending)
}

func (l *streamLane) retries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.retry)
}

// takeRetries takes up to n users to grab again.
func (l *streamLane) takeRetries(n int) []laneGrab {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.retry))
	out := append([]laneGrab(nil), l.retry[:n]...)
	l.retry = append(l.retry[:0], l.retry[n:]...)
	return out
}

// again queues a grab that has no answer to be sent again, while the
// lane's patience lasts.
func (l *streamLane) again(g laneGrab) {
	if time.Since(g.since) > lanePatience {
		return
	}
	l.mu.Lock()
	l.retry = append(l.retry, g)
	l.mu.Unlock()
}

// send sends grabs in one message, each in flight from just before it.
func (l *streamLane) send(ss *laneSession, grabs []laneGrab) {
	msg := &hongbaov1.GrabStreamRequest{}
	l.mu.Lock()
	if ss.over {
		l.retry = append(l.retry, grabs...)
		l.mu.Unlock()
		return
	}
	if !ss.named {
		ss.named, msg.CampaignId = true, l.h.id
	}
	for _, g := range grabs {
		l.ref++
		ss.pending[l.ref] = sentGrab{laneGrab: g, start: l.h.rec.Now()}
		msg.Grabs = append(msg.Grabs, &hongbaov1.StreamGrab{UserId: g.user, Ref: l.ref})
	}
	l.mu.Unlock()
	if err := ss.st.Send(msg); err != nil {
		// Receive tells why; if it does not soon, the stream is given up.
		go func() {
			select {
			case <-ss.dead:
			case <-time.After(2 * time.Second):
				ss.cancel()
			}
		}()
	}
}

// receive reads a stream's results until it ends, then settles what is
// still in flight.
func (l *streamLane) receive(ss *laneSession) {
	defer close(ss.dead)
	for {
		res, err := ss.st.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				ss.err = err
			}
			l.lose(ss)
			return
		}
		l.mu.Lock()
		ss.answered = true
		if ss.serve == l.home && !ss.over {
			l.live = ss
		}
		l.mu.Unlock()
		for _, r := range res.GetResults() {
			l.answer(ss, r)
		}
	}
}

// lose ends a stream: each grab in flight on it is unknown (refused if
// the stream never reached its serve), and is sent again.
func (l *streamLane) lose(ss *laneSession) {
	h := l.h
	l.mu.Lock()
	ss.over = true
	lost := ss.pending
	ss.pending = nil
	if l.live == ss {
		l.live = nil
	}
	l.mu.Unlock()
	var oe *net.OpError
	dial := errors.As(ss.err, &oe) && oe.Op == "dial"
	switch {
	case ss.err == nil && len(lost) > 0:
		h.t.Errorf("a stream ended with %d grabs unanswered", len(lost))
	case ss.err != nil && !dial:
		h.streamBreaks.Add(1)
		h.streamLost.Add(int64(len(lost)))
	}
	end := h.rec.Now()
	for _, p := range lost {
		op := history.Op{Kind: history.Grab, Campaign: h.id, User: p.user, Client: l.client, Start: p.start, End: end,
			Result: history.Unknown, Note: "stream ended"}
		if ss.err != nil {
			op.Note = "stream broke: " + ss.err.Error()
		}
		if dial {
			op.Result, op.Note = history.Fail, "dial: "+ss.err.Error()
		}
		h.rec.Add(op)
		l.again(p.laneGrab)
	}
}

// answer records the result of a grab in flight.
func (l *streamLane) answer(ss *laneSession, r *hongbaov1.GrabResult) {
	h := l.h
	l.mu.Lock()
	p, ok := ss.pending[r.GetRef()]
	delete(ss.pending, r.GetRef())
	l.mu.Unlock()
	if !ok {
		h.t.Errorf("a stream answered ref %d, which is not in flight: %v", r.GetRef(), r)
		return
	}
	if r.GetUserId() != p.user {
		h.t.Errorf("a stream answered ref %d for %s, sent for %s", r.GetRef(), r.GetUserId(), p.user)
	}
	op := history.Op{Kind: history.Grab, Campaign: h.id, User: p.user, Client: l.client, Start: p.start, End: h.rec.Now()}
	switch code := r.GetError(); code {
	case "":
		op.Result, op.Outcome = history.OK, hongbao.Outcome(r.GetOutcome()).String()
		op.Packet, op.Cents = r.GetPacketId(), r.GetAmountCents()
	case httpapi.CodeRateLimited:
		op.Result, op.Note = history.Fail, "429"
	case httpapi.CodeBusy, httpapi.CodeOutcomeUnknown, httpapi.CodeUnavailable, httpapi.CodeNotReady, httpapi.CodeInternal:
		op.Result, op.Note = history.Unknown, code
	default:
		op.Result, op.Note = history.Fail, code
		h.t.Errorf("a stream grab for %s answered %s", p.user, code)
	}
	h.rec.Add(op)
	if op.Result != history.OK {
		l.again(p.laneGrab)
		return
	}
	h.answered.Add(1)
	h.streamed.Add(1)
	if op.Outcome == "granted" {
		h.granted.Add(1)
	}
}
