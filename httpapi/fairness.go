package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
)

// Fairness is what the fairness routes need: a *hongbao.Engine is one.
type Fairness interface {
	Commitment(ctx context.Context, id string) ([]byte, error)
	Proof(ctx context.Context, id, user string) (fairness.Proof, error)
	DrawLog(ctx context.Context, id string, retention time.Duration, now time.Time, w io.Writer) error
	// GrantTime is the user's packet with its grant time from the ledger
	// (hongbao.ErrNotSettled before settlement recorded it).
	GrantTime(ctx context.Context, id, user string) (hongbao.Grant, error)
}

// DefaultDrawLogRetention is Config.DrawLogRetention's default: above the
// 90 days regulators ask for, and a year of complaints; the same as the
// settle worker's deletion of the draw data after it
// (settle.Config.DrawDataRetention).
const DefaultDrawLogRetention = fairness.DefaultRetention

// drawLogTimeout bounds a draw log's reads: ten million lines take a while.
const drawLogTimeout = 5 * time.Minute

var (
	errNoFairness = &requestError{code: CodeNoCommitment, msg: "this service keeps no fairness commitments"}
	errNoReceipts = &requestError{code: CodeNotFound, msg: "this service signs no receipts"}
	errNoTime     = &requestError{code: CodeNotFound, msg: "the ledger does not know when this packet was granted (it was settled before grant times were recorded): no receipt"}
)

// fairRoutes registers the fairness routes (docs/fairness.md).
func (s *Server) fairRoutes() {
	s.handle("GET /v1/campaigns/{id}/commitment", s.v1(s.userOrAdmin(s.commitment)))
	s.handle("GET /v1/campaigns/{id}/grants/me/proof", s.v1(s.user(s.myProof)))
	s.handle("GET /v1/campaigns/{id}/grants/me/receipt", s.v1(s.user(s.myReceipt)))
	s.handle("GET /v1/campaigns/{id}/draw-log", s.v1(s.admin(s.drawLog)))
	s.handle("GET /.well-known/jwks.json", s.jwks)
}

// userOrAdmin authenticates an operator's key or else a user's token (and
// applies the per-user limit to a user).
func (s *Server) userOrAdmin(next authedHandler) http.HandlerFunc {
	return s.authed(s.userOrAdminGate, next)
}

// userOrAdminGate is the gate of userOrAdmin (gates.go).
func (s *Server) userOrAdminGate(in inbound) (string, refusal) {
	if who, err := s.admins.match(in.header); err == nil {
		return who, refusal{}
	}
	return s.userGate(in)
}

func (s *Server) commitment(w http.ResponseWriter, r *http.Request, _ string) {
	id, ok := s.idTarget(w, r)
	if !ok {
		return
	}
	if s.cfg.Fairness == nil {
		s.fail(w, r, errNoFairness)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	body, err := s.cfg.Fairness.Commitment(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Recorded once and never changed: a cache may keep it.
	writeBody(w, http.StatusOK, append(bytes.TrimSpace(body), '\n'))
}

func (s *Server) myProof(w http.ResponseWriter, r *http.Request, user string) {
	if s.cfg.Fairness == nil {
		s.fail(w, r, errNoFairness)
		return
	}
	s.onCampaign(w, r, s.idTarget, func(ctx context.Context, id string) (any, error) {
		return s.cfg.Fairness.Proof(ctx, id, user)
	})
}

// receiptJSON is the body of the receipt route.
type receiptJSON struct {
	Receipt string `json:"receipt"`
}

func (s *Server) myReceipt(w http.ResponseWriter, r *http.Request, user string) {
	if s.cfg.Receipts == nil {
		s.fail(w, r, errNoReceipts)
		return
	}
	if s.cfg.Fairness == nil {
		s.fail(w, r, errNoFairness)
		return
	}
	s.onCampaign(w, r, s.idTarget, func(ctx context.Context, id string) (any, error) {
		// The grant's time is the ledger's: a grant not settled yet is
		// retried (ErrNotSettled), never stamped with a guess.
		g, err := s.cfg.Fairness.GrantTime(ctx, id, user)
		if err != nil {
			return nil, err
		}
		if g.GrantedAt.IsZero() {
			return nil, errNoTime
		}
		jws, err := s.cfg.Receipts.Sign(receiptOf(g, s.cfg.Now()))
		if err != nil {
			return nil, err
		}
		return receiptJSON{Receipt: jws}, nil
	})
}

// receiptOf is the receipt of grant g (g.GrantedAt set), signed at now.
func receiptOf(g hongbao.Grant, now time.Time) fairness.Receipt {
	return fairness.Receipt{CampaignID: g.Campaign, UserID: g.User, PacketID: g.PacketID(), AmountCents: g.Cents,
		GrantedAt: g.GrantedAt.UTC(), IssuedAt: now.Unix()}
}

// wantsReceipt says whether a grab asked for its receipt in the answer
// (?receipt=true): signing costs tens of microseconds, so only those who
// ask pay it, in their own request, never in the batch.
func wantsReceipt(r *http.Request) bool {
	v := r.URL.Query().Get("receipt")
	return v == "true" || v == "1"
}

// appendReceipt adds "receipt" to the grant's JSON in b (ending "}\n"),
// when the grant carries a packet and receipts are signed. A grant made
// now carries its time (the grab's answer); one held already (ALREADY)
// takes it from the ledger. A receipt that cannot be made yet (not
// settled) or whose signature fails is left out: the receipt route
// answers it.
func (s *Server) appendReceipt(ctx context.Context, b []byte, g hongbao.Grant) []byte {
	if s.cfg.Receipts == nil || !g.Outcome.HasPacket() || g.Seq == 0 || !bytes.HasSuffix(b, []byte("}\n")) {
		return b
	}
	if g.GrantedAt.IsZero() {
		if s.cfg.Fairness == nil {
			return b
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		held, err := s.cfg.Fairness.GrantTime(ctx, g.Campaign, g.User)
		cancel()
		if err != nil || held.Seq != g.Seq || held.GrantedAt.IsZero() {
			return b
		}
		g.GrantedAt = held.GrantedAt
	}
	jws, err := s.cfg.Receipts.Sign(receiptOf(g, s.cfg.Now()))
	if err != nil {
		s.log.Warn("receipt not signed", "campaign", g.Campaign, "err", err)
		return b
	}
	b = append(b[:len(b)-2], `,"receipt":"`...)
	b = append(b, jws...) // base64url and dots: nothing to escape
	return append(b, "\"}\n"...)
}

func (s *Server) drawLog(w http.ResponseWriter, r *http.Request, _ string) {
	id, ok := s.idTarget(w, r)
	if !ok {
		return
	}
	if s.cfg.Fairness == nil {
		s.fail(w, r, errNoFairness)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), max(s.cfg.Timeout, drawLogTimeout))
	defer cancel()
	lw := &lazyLines{w: w}
	err := s.cfg.Fairness.DrawLog(ctx, id, s.cfg.DrawLogRetention, s.cfg.Now(), lw)
	if err != nil && !lw.started {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		// Too late for a status: cut the body short, so the client sees
		// a broken transfer rather than a short log.
		s.log.Error("draw log cut short", "campaign", id, "err", err)
		panic(http.ErrAbortHandler)
	}
	if !lw.started {
		lw.start()
	}
}

// lazyLines writes the draw log's status and headers with its first line,
// so that a refusal before it still answers in the error shape.
type lazyLines struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyLines) start() {
	l.started = true
	h := l.w.Header()
	h.Set("Content-Type", "application/jsonl")
	h.Set("Cache-Control", "no-store")
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyLines) Write(p []byte) (int, error) {
	if !l.started {
		l.start()
	}
	return l.w.Write(p)
}

func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	body := []byte(`{"keys":[]}`)
	if s.cfg.Receipts != nil {
		body = s.cfg.Receipts.JWKS()
	}
	h := w.Header()
	h.Set("Content-Type", "application/jwk-set+json")
	h.Set("Cache-Control", "max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}
