package httpapi

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi/web"
	"github.com/hongbao/hongbao/settle"
)

// The routes of the console and the play page: the pages themselves
// (package web), the campaign list, the live event stream, the redrive
// action, and the demo mode's tokens.

// Demo is the demo mode of `hongbao demo --web`: anyone who asks gets a
// user token for a new random user, so a person can play a rain without a
// platform's app. Never on a real deployment.
type Demo struct {
	// Campaign returns the id of the demo's current campaign (a new one
	// opens when one sells out). Required.
	Campaign func() string
	// TokenTTL is the lifetime of the tokens handed out. Default 1h.
	TokenTTL time.Duration
	// TokenRate and TokenBurst limit the tokens handed out per client
	// address (an IPv6 address's /64), per second: each token is a new
	// user, and a script minting thousands would take the whole rain.
	// Default one every 10s, burst 5.
	TokenRate  float64
	TokenBurst int
}

// maxListed bounds the campaigns GET /v1/campaigns (GET /v1/discounts)
// reads and answers.
const maxListed = 200

// grabRoute is the pattern of the grab route, whose answers and refusals
// the console counts.
const grabRoute = "POST /v1/campaigns/{id}/grab"

// mountWeb registers the console's and the play page's routes.
func (s *Server) mountWeb() error {
	site, err := web.New(web.Options{Embedders: s.cfg.PlayEmbedders, Demo: s.cfg.Demo != nil})
	if err != nil {
		return err
	}
	s.handle("GET /v1/campaigns", s.v1(s.admin(s.listCampaigns)))
	s.handle("GET /v1/campaigns/{id}/events", s.v1(s.admin(s.campaignEvents)))
	s.handle("POST /v1/campaigns/{id}/redrive", s.v1(s.admin(s.redrive)))
	if s.cfg.Demo != nil {
		s.handle("GET /v1/demo", s.v1(s.anyone(s.demoInfo)))
		s.handle("POST /v1/demo/token", s.v1(s.anyone(s.demoToken)))
	}
	// The pages are not API routes: they are not in openapi.json.
	s.serve("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	s.serve("GET /console/{$}", site.Console)
	s.serve("GET /play/{campaign}", func(w http.ResponseWriter, r *http.Request) {
		if hongbao.ValidateCampaignID(r.PathValue("campaign")) != nil {
			web.NotFound(w, r)
			return
		}
		site.Play(w, r)
	})
	s.serve("GET /assets/{file}", site.Asset)
	s.cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hongbao_console_live_views",
		Help: "Console live views (event streams) open on this process.",
	}, func() float64 { return float64(s.live.viewers()) }))
	return nil
}

// countRefusal counts a grab refused by a rate limit for the console, when
// the campaign already has counts: a refused request proves nothing about
// its campaign id.
func (s *Server) countRefusal(in inbound) {
	if in.campaign != "" {
		s.live.store.record(in.campaign, liveLimited, 0, s.cfg.Now())
	}
}

// readLive is the hub's one reading of a campaign: its status and its
// settlement backlog.
func (s *Server) readLive(ctx context.Context, id string) (*hongbao.Status, settle.Backlog, error) {
	st, err := s.cfg.Engine.Status(ctx, id)
	if err != nil {
		return nil, settle.Backlog{}, err
	}
	b, err := s.cfg.Settlement.ReadBacklog(ctx, id)
	return st, b, err
}

// campaignListOut answers GET /v1/campaigns.
type campaignListOut struct {
	Campaigns []statusOut `json:"campaigns"`
	// Total counts the registered campaigns; More says there are some
	// after this page.
	Total int  `json:"total"`
	More  bool `json:"more"`
}

// listCampaigns answers a page of the registered campaigns (created and
// not yet settled: live, and closed until settlement refunds them), by
// close time. Requests for the same page that arrive while one reads
// Redis share its reading.
func (s *Server) listCampaigns(w http.ResponseWriter, r *http.Request, _ string) {
	s.listed(w, r, "campaigns", func(ctx context.Context, p page) (any, error) { return s.readCampaigns(ctx, p) })
}

func (s *Server) readCampaigns(ctx context.Context, p page) (campaignListOut, error) {
	out := campaignListOut{Campaigns: []statusOut{}}
	ids, total, err := s.cfg.Engine.CampaignsPage(ctx, p.offset, p.limit)
	if err != nil {
		return out, err
	}
	out.Total, out.More = total, p.offset+len(ids) < total
	for _, id := range ids {
		st, b, err := s.readLive(ctx, id)
		if errors.Is(err, hongbao.ErrCampaignNotFound) || errors.Is(err, settle.ErrNoCampaign) {
			continue // still loading, or gone since the listing
		}
		if err != nil {
			return out, err
		}
		out.Campaigns = append(out.Campaigns, statusJSON(st, b))
	}
	return out, nil
}

// campaignEvents streams a campaign's live view as Server-Sent Events: a
// "tick" every LiveInterval, shared by every viewer, "stale" when Redis
// could not be read, and "gone" when the campaign no longer exists.
func (s *Server) campaignEvents(w http.ResponseWriter, r *http.Request, admin string) {
	id, err := campaignID(r)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
		_, err = s.cfg.Engine.Status(ctx, id)
		cancel()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sub, err := s.live.subscribe(id)
	switch {
	case errors.Is(err, errTooManyWatchers):
		s.refuse(w, errLiveViewsFull, 0)
		return
	case err != nil:
		s.refuse(w, errShuttingDown, 0)
		return
	}
	defer s.live.unsubscribe(sub)
	s.log.Debug("live view opened", "who", admin, "campaign", id, "remote", s.remote(r))
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold the events back
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		// Each write gets its own deadline: the server's write timeout,
		// meant for a whole answer, would end the stream.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.Timeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte("retry: 2000\n\n")) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.live.done:
			write(sseEvent("bye", map[string]string{"message": "the server is stopping"}))
			return
		case ev, ok := <-sub.ch:
			if !ok || !write(ev) {
				return
			}
		}
	}
}

// redriveOut answers POST /v1/campaigns/{id}/redrive.
type redriveOut struct {
	Campaign string `json:"campaign"`
	// Redriven counts the dead entries moved back to the grants stream.
	Redriven int64 `json:"redriven_entries"`
}

// redrive puts a campaign's dead grants back into its grants stream, for
// an operator who fixed their cause; the settlement worker settles them
// on its next pass.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request, admin string) {
	s.onCampaign(w, r, s.actionTarget, func(ctx context.Context, id string) (any, error) {
		n, err := s.cfg.Settlement.Redrive(ctx, id)
		if err != nil {
			return nil, err
		}
		s.log.Info("admin action", "who", admin, "action", "redrive", "campaign", id, "entries", n, "remote", s.remote(r))
		return redriveOut{Campaign: id, Redriven: n}, nil
	})
}

// demoOut answers GET /v1/demo.
type demoOut struct {
	Campaign string `json:"campaign"`
}

func (s *Server) demoInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, demoOut{Campaign: s.cfg.Demo.Campaign()})
}

// demoTokenOut answers POST /v1/demo/token.
type demoTokenOut struct {
	Token     string `json:"token"`
	User      string `json:"user"`
	ExpiresAt string `json:"expires_at"`
	Campaign  string `json:"campaign"`
}

// demoToken hands out a user token for a new random user.
func (s *Server) demoToken(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err == nil {
		err = decodeEmpty(body)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ok, wait := s.demoLim.allow(s.addrKey(r), s.cfg.Now()); !ok {
		s.metrics.limited.WithLabelValues("demo_token").Inc()
		s.refuse(w, errDemoLimit, wait)
		return
	}
	const letters = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	user, now := "demo-"+string(b), s.cfg.Now()
	tok, err := MintScopedToken(s.cfg.UserSecrets[0], s.cfg.Token, user, s.cfg.Demo.TokenTTL, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, demoTokenOut{
		Token: tok, User: user, ExpiresAt: rfc3339(now.Add(s.cfg.Demo.TokenTTL).Truncate(time.Second)),
		Campaign: s.cfg.Demo.Campaign(),
	})
}

// setLiveDefaults fills the console's defaults into cfg.
func setLiveDefaults(cfg *Config) {
	if cfg.LiveInterval == 0 {
		cfg.LiveInterval = time.Second
	}
	if cfg.MaxLiveViews == 0 {
		cfg.MaxLiveViews = 64
	}
	if cfg.MaxLiveCampaigns == 0 {
		cfg.MaxLiveCampaigns = 256
	}
	cfg.MaxLiveCampaigns = max(cfg.MaxLiveCampaigns, cfg.MaxLiveViews)
	if cfg.Demo != nil {
		d := *cfg.Demo
		if d.TokenTTL == 0 {
			d.TokenTTL = time.Hour
		}
		if d.TokenRate == 0 {
			d.TokenRate = 0.1
		}
		if d.TokenBurst == 0 {
			d.TokenBurst = 5
		}
		cfg.Demo = &d
	}
}
