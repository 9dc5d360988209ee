package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/hongbao/hongbao"
)

// createKind is what creating a campaign of one kind (red packets,
// discounts) does that is its own: the body it decodes, the engine calls
// it makes, what it logs and the JSON it answers. create runs the rest,
// the same for both: the Idempotency-Key, the ledger's retired check and
// the replay of a create already done.
type createKind[S, C any] struct {
	name     string                       // the log key of the id: "campaign", "discount"
	action   string                       // the admin action logged: "create", "create-discount"
	decode   func([]byte, int) (S, error) // the body, with Config.MaxCount
	id       func(*S) *string             // the spec's campaign id
	ledgerID func(string) string          // the id the ledger knows the campaign under
	create   func(context.Context, S) (C, error)
	status   func(context.Context, string) (C, error)
	same     func(C, S) bool                                    // whether the campaign is what the spec creates
	created  func(context.Context, *http.Request, string, S, C) // logs a new campaign
	json     func(C) any
}

// create answers a create of kind k.
func create[S, C any](s *Server, k *createKind[S, C], w http.ResponseWriter, r *http.Request, admin string) {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	spec, err := k.decode(body, s.cfg.MaxCount)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := k.id(&spec)
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if *id, err = idempotentID(key); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 4*s.cfg.Timeout)
	defer cancel()
	if *id != "" && s.cfg.Retired != nil {
		if err := checkNotRetired(ctx, s, k, *id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	// The engine refuses a retired id itself (ErrCampaignRetired), after
	// the check above: the keys expired in between, or the server checks
	// no Retired of its own. A create of an id another request (here or on
	// another replica) is creating waits for that one, and answers
	// ErrCampaignExists once it is live: the replay below; or
	// ErrCreateInProgress when the request's time ran out first (409
	// in_progress, errorTable).
	c, err := k.create(ctx, spec)
	var exists *hongbao.ExistsError
	if errors.As(err, &exists) {
		replay(ctx, s, k, w, r, admin, spec)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	k.created(ctx, r, admin, spec, c)
	writeJSON(w, http.StatusCreated, k.json(c))
}

// checkNotRetired refuses an Idempotency-Key whose campaign the ledger
// knows while Redis does not: it was settled and its keys expired (after
// the settlement's retention, 7 days by default).
func checkNotRetired[S, C any](ctx context.Context, s *Server, k *createKind[S, C], id string) error {
	known, err := s.cfg.Retired(ctx, k.ledgerID(id))
	if err != nil {
		s.log.Warn("idempotency check: ledger lookup failed", k.name, id, "err", err)
		return errLedgerUnread
	}
	if !known {
		return nil
	}
	_, err = k.status(ctx, id)
	switch {
	case errors.Is(err, hongbao.ErrCampaignNotFound):
		return errKeyRetired
	case err != nil:
		return err
	}
	return nil // still in Redis: the create replays it
}

// replay answers a create whose Idempotency-Key names an existing
// campaign: that campaign if it is the same spec.
func replay[S, C any](ctx context.Context, s *Server, k *createKind[S, C], w http.ResponseWriter, r *http.Request, admin string, spec S) {
	id := *k.id(&spec)
	c, err := k.status(ctx, id)
	if errors.Is(err, hongbao.ErrCampaignNotFound) {
		// A rebuild holds the campaign (the engine waits for a create
		// loading it): not live yet.
		err = errCreateLoading
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !k.same(c, spec) {
		s.fail(w, r, errKeyReused)
		return
	}
	s.log.Info("admin action", "who", admin, "action", k.action+"-replayed", k.name, id, "remote", s.remote(r))
	writeJSON(w, http.StatusOK, k.json(c))
}
