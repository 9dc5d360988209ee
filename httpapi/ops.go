package httpapi

import (
	"context"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/metrics"
)

// The operations of the grab and discount routes apart from any protocol:
// each takes what its request names, once decoded, and its caller, runs
// under the request timeout (Config.Timeout), calls the engine and counts
// its answer where this process counts it (the console's live counts;
// the metrics of the outcomes are the engine's observers', package
// metrics). It returns the answer or the error that errorTable turns into
// a neutral answer (answerFor). The JSON handlers decode, call one and
// encode; a second protocol calls the same ones.

// grabOp grabs a packet of campaign id for user.
func (s *Server) grabOp(ctx context.Context, id, user string) (hongbao.Grant, error) {
	// A batch's users share the batch's deadline, no later than this one
	// would be: a context of their own each would only cost (a cancel
	// context registered with the request's, 100 a batch of 100).
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > s.cfg.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	start := time.Now()
	g, err := s.cfg.Engine.Grab(ctx, id, user)
	if err != nil {
		label, live := metrics.ErrorLabel(err), liveError
		if label == CodeBusy {
			live = liveBusy
		}
		if label != CodeNotFound {
			s.live.store.record(id, live, 0, start)
		}
		return g, err
	}
	s.live.store.record(id, liveOutcomeOf(g.Outcome), g.Cents, start)
	return g, nil
}

// heldOp reads the packet user holds of campaign id.
func (s *Server) heldOp(ctx context.Context, id, user string) (hongbao.Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.cfg.Engine.Held(ctx, id, user)
}

// reserveOp reserves a discount of campaign id for the order rv names.
func (s *Server) reserveOp(ctx context.Context, id string, rv reservation) (hongbao.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.cfg.Discounts.Reserve(ctx, id, rv.user, rv.order, rv.cents)
}

// confirmOp confirms the discount user's order holds of campaign id.
func (s *Server) confirmOp(ctx context.Context, id, user, order string) (hongbao.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.cfg.Discounts.Confirm(ctx, id, user, order)
}

// cancelOp cancels the discount user's order holds of campaign id.
func (s *Server) cancelOp(ctx context.Context, id, user, order string) (hongbao.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.cfg.Discounts.Cancel(ctx, id, user, order)
}
