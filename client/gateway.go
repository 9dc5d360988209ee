package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// MaxGatewayBatch is the most users one batch request names (the
// service's limit on POST /v1/campaigns/{id}/grabs).
const MaxGatewayBatch = 1000

// ErrGatewayFull is the answer of a Gateway's Grab when the campaign's
// queue already holds GatewayOptions.MaxQueue callers: nothing was sent.
var ErrGatewayFull = errors.New("hongbao: gateway queue full")

// GatewayOptions configure a Gateway. The zero value of every field is
// its default.
type GatewayOptions struct {
	// MaxBatch is the most users one request names. Default and most:
	// MaxGatewayBatch. In stream mode: the most grabs in flight on a
	// campaign's stream (sent, unanswered), and so in one message.
	MaxBatch int
	// InFlight is the most batch requests in flight per campaign (not
	// used in stream mode). Default 1: while one is in flight the callers that arrive queue, and the
	// next request takes them all (up to MaxBatch) as soon as it returns.
	InFlight int
	// MaxQueue is the most callers waiting per campaign to be sent; a
	// Grab beyond it answers ErrGatewayFull at once. Default
	// 10 * MaxBatch.
	MaxQueue int
	// Observe, when set, is called after each batch request (its retries
	// included) with what it was: for metrics of batch sizes and
	// latencies. It runs on the request's goroutine: keep it short.
	Observe func(GatewayBatch)
	// Stream sends the grabs on one GrabStream per campaign instead of
	// batch requests (see the package documentation); it needs a Client
	// whose Protocol is Connect or GRPC. Default false.
	Stream bool
	// StreamIdle is how long a campaign's stream stays open once no
	// caller waits on it. Default 1 minute.
	StreamIdle time.Duration
}

// GatewayBatch describes one batch request of a Gateway, for
// GatewayOptions.Observe.
type GatewayBatch struct {
	Campaign string
	Users    int           // users the request named
	Elapsed  time.Duration // from the first attempt to the answer, retries included
	Err      error         // the batch's error, nil when it was answered
}

// In stream mode Observe sees each message of results (Users: the
// results it carries, Elapsed: from sending the oldest of their grabs)
// and each broken stream (Users: the grabs it left unanswered, Err: why
// it broke).

// Gateway grabs packets for many users through the gateway's batch route
// (POST /v1/campaigns/{id}/grabs, or GrabBatch under Connect and gRPC),
// coalescing concurrent Grab calls of a campaign into batch requests, or
// in stream mode (GatewayOptions.Stream) over one GrabStream per
// campaign. Its Client's credential is a gateway key
// (serve --gateway-key-file) or an admin key. It is safe for concurrent
// use. In batch mode it needs no Close: it runs goroutines only while
// requests are in flight.
type Gateway struct {
	c *Client
	o GatewayOptions

	mu      sync.Mutex
	lanes   map[string]*lane       // by campaign, while a caller waits
	streams map[string]*streamLane // by campaign, in stream mode
	closed  bool
	wg      sync.WaitGroup // the goroutines of lanes and streams
}

// Gateway returns a Gateway that sends its batches with c (c's token is
// the gateway key).
func (c *Client) Gateway(o GatewayOptions) (*Gateway, error) {
	if o.MaxBatch < 0 || o.MaxBatch > MaxGatewayBatch || o.InFlight < 0 || o.MaxQueue < 0 || o.StreamIdle < 0 {
		return nil, fmt.Errorf("hongbao client: gateway options: MaxBatch 0 to %d, InFlight, MaxQueue and StreamIdle not negative", MaxGatewayBatch)
	}
	if o.Stream && c.rpc == nil {
		return nil, errors.New("hongbao client: a gateway's stream needs a client whose Protocol is Connect or GRPC")
	}
	if o.StreamIdle == 0 {
		o.StreamIdle = time.Minute
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = MaxGatewayBatch
	}
	if o.InFlight == 0 {
		o.InFlight = 1
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 10 * o.MaxBatch
	}
	return &Gateway{c: c, o: o, lanes: map[string]*lane{}, streams: map[string]*streamLane{}}, nil
}

// Close stops taking grabs (a Grab then answers ErrGatewayClosed), and
// returns once every caller waiting was answered and every stream
// ended. A Gateway needs no Close in batch mode, where it runs goroutines
// only while requests are in flight; in stream mode a campaign's stream
// stays open StreamIdle after its last caller, or until Close.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	var ls []*streamLane
	for _, l := range g.streams {
		ls = append(ls, l)
	}
	g.mu.Unlock()
	for _, l := range ls {
		l.poke()
	}
	g.wg.Wait()
	return nil
}

// Queued is how many callers of campaign wait to be sent (not those of
// a batch in flight): a gauge for metrics.
func (g *Gateway) Queued(campaign string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.lanes[campaign]; l != nil {
		return l.waiting
	}
	if l := g.streams[campaign]; l != nil {
		return l.queued
	}
	return 0
}

// lane is one campaign's queue and its requests in flight. Its fields
// are guarded by Gateway.mu.
type lane struct {
	queue   []*waiter // in arrival order; gone ones are skipped
	waiting int       // queued and not gone
	sending int       // senders running
}

// waiter states, guarded by Gateway.mu.
const (
	queued = iota // in its lane's queue
	sent          // in a batch in flight
	gone          // its caller gave up while queued: never sent
	done          // answered on res
)

// waiter is one Grab waiting for its batch.
type waiter struct {
	ctx   context.Context
	user  string
	state int
	b     *batch
	res   chan gatewayResult // buffered: the sender never blocks
}

type gatewayResult struct {
	grab *Grab
	err  error
}

// batch is one request's callers. Its context is canceled once every
// caller in it has given up, and not before: one caller's cancellation
// does not cancel the others' batch.
type batch struct {
	live   int // callers still waiting for it
	cancel context.CancelFunc
}

// Grab grabs a packet of campaign for user, in a batch with the other
// users of the campaign whose Grab calls wait at the same time. It
// answers as Client.Grab does for the user's own token: the outcome, with
// the packet for Granted and AlreadyGranted.
//
// A user id the service would refuse is refused here, matching
// ErrInvalidID, before it joins a batch (the service refuses a whole
// batch for one bad id). A user past the service's per-user limit is
// answered an *Error with Code "rate_limited" (nothing was attempted for
// them). An error of the whole batch (404 not_found, 401, a reply lost
// after the last retry: ErrOutcomeUnknown) is every caller's error.
//
// When ctx ends before the answer: a caller still queued leaves the
// queue and hears ctx's error (nothing was sent for them); a caller whose
// batch is in flight hears an error matching ErrOutcomeUnknown and the
// batch goes on for the others. In stream mode the same holds of a
// grab queued and one sent on the stream.
func (g *Gateway) Grab(ctx context.Context, campaign, user string) (*Grab, error) {
	if err := ValidateUserID(user); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if g.o.Stream {
		return g.streamGrab(ctx, campaign, user)
	}
	w := &waiter{ctx: ctx, user: user, res: make(chan gatewayResult, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrGatewayClosed
	}
	l := g.lanes[campaign]
	if l == nil {
		l = &lane{}
		g.lanes[campaign] = l
	}
	if l.waiting >= g.o.MaxQueue {
		g.mu.Unlock()
		return nil, ErrGatewayFull
	}
	l.queue = append(l.queue, w)
	l.waiting++
	if l.sending < g.o.InFlight {
		l.sending++
		g.wg.Add(1)
		go g.send(campaign, l)
	}
	g.mu.Unlock()

	select {
	case r := <-w.res:
		return r.grab, r.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	switch w.state {
	case queued:
		w.state = gone
		l.waiting--
		g.mu.Unlock()
		return nil, ctx.Err()
	case sent:
		w.state = gone
		if w.b.live--; w.b.live == 0 {
			w.b.cancel()
		}
		g.mu.Unlock()
		return nil, &lostError{err: ctx.Err()}
	}
	g.mu.Unlock()
	r := <-w.res // answered as ctx ended
	return r.grab, r.err
}

// send is a sender of campaign's lane: it takes what is queued (up to
// MaxBatch), sends it, answers its callers, and again, until the queue
// is empty.
func (g *Gateway) send(campaign string, l *lane) {
	defer g.wg.Done()
	for {
		ws, b, ctx := g.take(campaign, l)
		if ws == nil {
			return
		}
		users := make([]string, len(ws))
		for i, w := range ws {
			users[i] = w.user
		}
		start := time.Now()
		res, err := g.c.grabBatch(ctx, campaign, users)
		b.cancel()
		if g.o.Observe != nil {
			g.o.Observe(GatewayBatch{Campaign: campaign, Users: len(users), Elapsed: time.Since(start), Err: err})
		}
		g.mu.Lock()
		for i, w := range ws {
			if w.state != sent {
				continue // its caller has gone
			}
			w.state = done
			if err != nil {
				w.res <- gatewayResult{err: err}
			} else {
				w.res <- res[i]
			}
		}
		g.mu.Unlock()
	}
}

// take moves up to MaxBatch waiting callers of the lane into a batch,
// with the context the batch is sent under: the first caller's values
// (its trace), canceled only when every caller has gone. With none
// waiting the sender stops, and the lane is dropped when it was the last.
func (g *Gateway) take(campaign string, l *lane) ([]*waiter, *batch, context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ws []*waiter
	n := 0
	for n < len(l.queue) && len(ws) < g.o.MaxBatch {
		if w := l.queue[n]; w.state == queued {
			ws = append(ws, w)
		}
		n++
	}
	clear(l.queue[:n])
	l.queue = l.queue[n:]
	if len(ws) == 0 {
		l.queue = nil
		if l.sending--; l.sending == 0 {
			delete(g.lanes, campaign)
		}
		return nil, nil, nil
	}
	l.waiting -= len(ws)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ws[0].ctx))
	b := &batch{live: len(ws), cancel: cancel}
	for _, w := range ws {
		w.state, w.b = sent, b
	}
	return ws, b, ctx
}

// grabsReply is the batch route's answer.
type grabsReply struct {
	Results []struct {
		UserID      string `json:"user_id"`
		Outcome     string `json:"outcome"`
		PacketID    string `json:"packet_id"`
		AmountCents int64  `json:"amount_cents"`
		Error       string `json:"error"`
	} `json:"results"`
}

// grabBatch sends one batch of grabs, retried as a single grab is (the
// route is idempotent per user: a retry answers already_granted with the
// same packet), and answers each user's result in users' order.
func (c *Client) grabBatch(ctx context.Context, campaign string, users []string) ([]gatewayResult, error) {
	if c.rpc != nil {
		return c.grabBatchRPC(ctx, campaign, users)
	}
	body := struct {
		Users []string `json:"users"`
	}{users}
	var out grabsReply
	k := call{method: http.MethodPost, path: campaignPath(campaign, "/grabs"), idempotent: true, body: body, out: &out}
	if err := c.do(ctx, k); err != nil {
		return nil, err
	}
	if len(out.Results) != len(users) {
		return nil, fmt.Errorf("hongbao client: POST %s: %d results for %d users", k.path, len(out.Results), len(users))
	}
	res := make([]gatewayResult, len(users))
	for i, r := range out.Results {
		switch {
		case r.UserID != users[i]:
			return nil, fmt.Errorf("hongbao client: POST %s: result %d is of user %q, not %q", k.path, i, r.UserID, users[i])
		case r.Error != "":
			// The route's one per-user error is rate_limited, the
			// single grab's 429; a code it adds later keeps no status.
			e := &Error{Code: r.Error, Message: "the user's grab was not attempted"}
			if r.Error == "rate_limited" {
				e.Status = http.StatusTooManyRequests
			}
			res[i].err = e
		default:
			res[i].grab = &Grab{Campaign: campaign, Outcome: r.Outcome, PacketID: r.PacketID, AmountCents: r.AmountCents}
		}
	}
	return res, nil
}
