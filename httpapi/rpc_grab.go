package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client/hongbaov1"
	"github.com/hongbao/hongbao/client/hongbaov1/hongbaov1connect"
)

// The grab procedures: Grab as POST /v1/campaigns/{id}/grab, GrabBatch as
// POST /v1/campaigns/{id}/grabs, and GrabStream, a gateway's stream whose
// grabs go through grabBatchOp as GrabBatch's do.

// maxStreamInFlight bounds the grabs a stream holds, read and not yet
// answered: past it the stream reads no more (HTTP/2 flow control then
// holds the gateway back) until results went out.
const maxStreamInFlight = MaxGrabBatch

// rpcGrabs implements the GrabService.
type rpcGrabs struct{ s *Server }

var _ hongbaov1connect.GrabServiceHandler = rpcGrabs{}

func (g rpcGrabs) Grab(ctx context.Context, req *connect.Request[hongbaov1.GrabRequest]) (*connect.Response[hongbaov1.GrabResponse], error) {
	out, err := g.grab(ctx, req.Spec(), req.Header(), req.Peer(), req.Msg.GetCampaignId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// grab is Grab, for connect's handler and for Grab's plain Connect form
// (rpc_fast.go).
func (g rpcGrabs) grab(ctx context.Context, spec connect.Spec, header http.Header, peer connect.Peer, id string) (*hongbaov1.GrabResponse, error) {
	s, route := g.s, spec.Procedure
	user, err := s.admit(ctx, spec, header, peer, id, s.userGate)
	if err != nil {
		return nil, err
	}
	if err := checkCampaignID(id); err != nil {
		return nil, s.rpcFail(route, err)
	}
	gr, err := s.grabOp(ctx, id, user)
	if err != nil {
		return nil, s.rpcFail(route, err)
	}
	out := &hongbaov1.GrabResponse{CampaignId: gr.Campaign, Outcome: hongbaov1.GrabOutcome(gr.Outcome)}
	if gr.Outcome.HasPacket() {
		out.PacketId, out.AmountCents, out.Amount = gr.PacketID(), gr.Cents, hongbao.FormatCents(gr.Cents)
	}
	return out, nil
}

func (g rpcGrabs) GrabBatch(ctx context.Context, req *connect.Request[hongbaov1.GrabBatchRequest]) (*connect.Response[hongbaov1.GrabBatchResponse], error) {
	s, id, route := g.s, req.Msg.GetCampaignId(), req.Spec().Procedure
	if _, err := s.admit(ctx, req.Spec(), req.Header(), req.Peer(), id, s.gatewayGate); err != nil {
		return nil, err
	}
	users := req.Msg.GetUserIds()
	err := checkCampaignID(id)
	if err == nil {
		err = checkGrabUsers(users, "user_ids")
	}
	if err != nil {
		return nil, s.rpcFail(route, err)
	}
	res, err := s.grabBatchOp(ctx, id, users)
	if err != nil {
		return nil, s.rpcFail(route, err)
	}
	out := &hongbaov1.GrabBatchResponse{Results: make([]*hongbaov1.GrabResult, len(res))}
	all := make([]hongbaov1.GrabResult, len(res))
	for i, x := range res {
		out.Results[i] = &all[i]
		fillGrabResult(out.Results[i], users[i], 0, x)
	}
	return connect.NewResponse(out), nil
}

// fillGrabResult fills r, a zero result, with one user's answer in a
// batch or a stream, as appendBatchResult spells it in JSON.
func fillGrabResult(r *hongbaov1.GrabResult, user string, ref uint64, x batchResult) {
	r.UserId, r.Ref = user, ref
	if x.limited {
		r.Error = CodeRateLimited
		return
	}
	r.Outcome = hongbaov1.GrabOutcome(x.grant.Outcome)
	if x.grant.Outcome.HasPacket() {
		r.PacketId, r.AmountCents, r.Amount = x.grant.PacketID(), x.grant.Cents, hongbao.FormatCents(x.grant.Cents)
	}
}

func (g rpcGrabs) GrabStream(ctx context.Context, st *connect.BidiStream[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse]) error {
	s := g.s
	if _, err := s.admit(ctx, st.Spec(), st.RequestHeader(), st.Peer(), "", s.gatewayGate); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gs := &grabStream{s: s, st: st, route: st.Spec().Procedure, slots: make(chan struct{}, maxStreamInFlight),
		ready: make(chan struct{}, 1), cancel: cancel}
	done := make(chan struct{})
	defer close(done)
	if rc, ok := ctx.Value(streamControlKey{}).(*http.ResponseController); ok {
		go func() {
			select {
			case <-s.stopped:
				// The read ends now; what was read is answered.
				gs.stopping.Store(true)
				_ = rc.SetReadDeadline(time.Now())
			case <-done:
			}
		}()
	}
	var wg sync.WaitGroup
	wg.Go(func() { gs.dispatch(ctx) })
	err := gs.receive(ctx)
	gs.closeQueue()
	wg.Wait()
	if gs.sendErr != nil {
		return gs.sendErr
	}
	return err
}

// streamGrab is one grab of a stream, read and not yet answered.
type streamGrab struct {
	user string
	ref  uint64
}

// grabStream is one gateway stream: receive reads its messages and queues
// their grabs; dispatch takes what is queued, up to MaxGrabBatch, through
// grabBatchOp, one batch at a time, and sends its results. What arrives
// while a batch is in flight goes in the next one, as the engine
// coalesces grabs: the batches grow with the load.
type grabStream struct {
	s      *Server
	st     *connect.BidiStream[hongbaov1.GrabStreamRequest, hongbaov1.GrabStreamResponse]
	route  string
	cancel context.CancelFunc
	// slots holds one token per grab in flight (maxStreamInFlight).
	slots    chan struct{}
	ready    chan struct{} // a grab was queued, or the queue closed
	stopping atomic.Bool

	mu       sync.Mutex
	campaign string
	queue    []streamGrab
	closed   bool
	sendMu   sync.Mutex
	sendErr  error
}

// receive reads the stream's messages until the gateway closes its side
// (nil) or the stream fails. A message is the equivalent of a batch
// request: the first went through the gates when the stream opened, each
// later one spends the per-address limit and the global budget again.
func (gs *grabStream) receive(ctx context.Context) error {
	s := gs.s
	for n := 0; ; n++ {
		msg, err := gs.st.Receive()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && gs.stopping.Load():
			return s.rpcRefusal(errShuttingDown, 0)
		case err != nil:
			return err
		}
		if err := gs.checkMessage(msg); err != nil {
			return s.rpcFail(gs.route, err)
		}
		grabs := msg.GetGrabs()
		if n > 0 {
			if no := gs.gates(ctx); no.refused() {
				gs.refuseAll(grabs, no)
				continue
			}
		}
		valid := grabs[:0:0]
		for _, g := range grabs {
			if err := hongbao.ValidateUserID(g.GetUserId()); err != nil {
				gs.send([]*hongbaov1.GrabResult{{UserId: g.GetUserId(), Ref: g.GetRef(), Error: CodeInvalidRequest}})
				continue
			}
			valid = append(valid, g)
		}
		// A place in flight for each grab, then the message's grabs queued
		// at once: one lock and one wake-up a message, not a grab.
		for range valid {
			if err := gs.acquire(ctx); err != nil {
				return err
			}
		}
		gs.put(valid)
	}
}

// acquire takes a place in flight for one grab, waiting while the stream
// holds maxStreamInFlight.
func (gs *grabStream) acquire(ctx context.Context) error {
	select {
	case gs.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case gs.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkMessage refuses a message that breaks the stream's contract: the
// first names a valid campaign, later ones the same or none, each 1 to
// MaxGrabBatch grabs.
func (gs *grabStream) checkMessage(msg *hongbaov1.GrabStreamRequest) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	id := msg.GetCampaignId()
	switch {
	case gs.campaign == "":
		if id == "" {
			return badRequest(CodeInvalidRequest, "campaign_id: the first message of a stream names its campaign")
		}
		if err := checkCampaignID(id); err != nil {
			return err
		}
		gs.campaign = id
	case id != "" && id != gs.campaign:
		return badRequest(CodeInvalidRequest, "campaign_id: a stream grabs one campaign; open another stream for %s", id)
	}
	if n := len(msg.GetGrabs()); n < 1 || n > MaxGrabBatch {
		return badRequest(CodeInvalidRequest, "grabs: give 1 to %d grabs a message", MaxGrabBatch)
	}
	return nil
}

// gates applies to a later message the gates a request passes once its
// caller is known: the per-address limit and the global budget.
func (gs *grabStream) gates(ctx context.Context) refusal {
	in := inbound{ctx: ctx, route: gs.route, campaign: gs.campaign, header: gs.st.RequestHeader(), peer: gs.st.Peer().Addr}
	if no := gs.s.ipGate(in); no.refused() {
		return no
	}
	return gs.s.spendGate(in)
}

// refuseAll answers every grab of a message with a gate's refusal.
func (gs *grabStream) refuseAll(grabs []*hongbaov1.StreamGrab, no refusal) {
	wait := no.wait
	if wait <= 0 && no.answer.retry {
		wait = gs.s.cfg.RetryAfter
	}
	out := make([]*hongbaov1.GrabResult, len(grabs))
	for i, g := range grabs {
		out[i] = &hongbaov1.GrabResult{UserId: g.GetUserId(), Ref: g.GetRef(), Error: no.answer.code, RetryAfterMs: wait.Milliseconds()}
	}
	gs.send(out)
}

// put queues a message's grabs for the next batch.
func (gs *grabStream) put(grabs []*hongbaov1.StreamGrab) {
	if len(grabs) == 0 {
		return
	}
	gs.mu.Lock()
	for _, g := range grabs {
		gs.queue = append(gs.queue, streamGrab{user: g.GetUserId(), ref: g.GetRef()})
	}
	gs.mu.Unlock()
	select {
	case gs.ready <- struct{}{}:
	default:
	}
}

// closeQueue says no grab comes any more: dispatch answers what is queued
// and returns.
func (gs *grabStream) closeQueue() {
	gs.mu.Lock()
	gs.closed = true
	gs.mu.Unlock()
	select {
	case gs.ready <- struct{}{}:
	default:
	}
}

// take waits for queued grabs and takes up to MaxGrabBatch of them; nil
// once the queue is closed and empty.
func (gs *grabStream) take() ([]streamGrab, string) {
	for {
		gs.mu.Lock()
		if n := min(len(gs.queue), MaxGrabBatch); n > 0 {
			batch := append([]streamGrab(nil), gs.queue[:n]...)
			gs.queue = append(gs.queue[:0], gs.queue[n:]...)
			gs.mu.Unlock()
			return batch, gs.campaign
		}
		closed := gs.closed
		gs.mu.Unlock()
		if closed {
			return nil, ""
		}
		<-gs.ready
	}
}

// dispatch runs the queued grabs through grabBatchOp, one batch at a
// time, and sends each batch's results. A batch that fails answers each
// of its grabs with the error's code, as GrabBatch would fail whole; a
// retry answers the grabs granted before it already_granted.
func (gs *grabStream) dispatch(ctx context.Context) {
	for {
		batch, id := gs.take()
		if batch == nil {
			return
		}
		users := make([]string, len(batch))
		for i, g := range batch {
			users[i] = g.user
		}
		res, err := gs.s.grabBatchOp(ctx, id, users)
		out := make([]*hongbaov1.GrabResult, len(batch))
		// The batch's results in one allocation, not one each.
		all := make([]hongbaov1.GrabResult, len(batch))
		var a *requestError
		if err != nil {
			a = gs.s.answerFor(gs.route, err)
		}
		for i, g := range batch {
			out[i] = &all[i]
			if a != nil {
				out[i].UserId, out[i].Ref, out[i].Error = g.user, g.ref, a.code
				if a.retry {
					out[i].RetryAfterMs = gs.s.cfg.RetryAfter.Milliseconds()
				}
				continue
			}
			fillGrabResult(out[i], g.user, g.ref, res[i])
		}
		gs.send(out)
		for range batch {
			<-gs.slots
		}
	}
}

// send sends results; the first failure ends the stream (its reader is
// cancelled) and is the stream's answer.
func (gs *grabStream) send(results []*hongbaov1.GrabResult) {
	gs.sendMu.Lock()
	defer gs.sendMu.Unlock()
	if gs.sendErr != nil {
		return
	}
	if err := gs.st.Send(&hongbaov1.GrabStreamResponse{Results: results}); err != nil {
		gs.sendErr = err
		gs.cancel()
	}
}
