package httpapi

import (
	"context"
	"net/http"
	"reflect"

	"github.com/hongbao/hongbao"
)

// The operator's brakes: pause and resume a campaign (a discount
// campaign), and block users of one, all with the admin key. Each is
// idempotent, so a retry after a lost answer is safe. A pause is decided
// in the grab (reserve) script: once the call has answered, no grab is
// granted on any shard; a blocked user's grab is refused in the same way.

// brakes is a kind of campaign as the pause and blocklist routes serve
// it: where its routes live, its word in the log, and its calls.
type brakes struct {
	path string // the kind's collection: /v1/campaigns, /v1/discounts
	name string // the log's key of the campaign id
	// pause pauses (or resumes) a campaign of the kind.
	pause pauseOf
	// blocks is the kind's blocklist, read when a request comes (a
	// server's services are set by then).
	blocks func() blocklist
}

// blocklist is what the blocklist routes need of a kind of campaign:
// hongbao.Engine and hongbao.Discounts are each one.
type blocklist interface {
	Block(ctx context.Context, id string, users []string) (int, error)
	Unblock(ctx context.Context, id string, users []string) (int, error)
	BlockedPage(ctx context.Context, id string, offset, limit int) ([]hongbao.BlockedUser, int, error)
}

// kinds lists every kind of campaign the brakes serve.
func (s *Server) kinds() []brakes {
	return []brakes{
		{path: "/v1/campaigns", name: "campaign", pause: s.pauseCampaign, blocks: func() blocklist { return s.cfg.Engine }},
		{path: "/v1/discounts", name: "discount", pause: s.pauseDiscount, blocks: func() blocklist { return s.cfg.Discounts }},
	}
}

// pauseRoutes registers the pause and blocklist routes of every kind.
func (s *Server) pauseRoutes() {
	for _, k := range s.kinds() {
		s.handle("POST "+k.path+"/{id}/pause", s.v1(s.admin(s.pauseRoute(k, true))))
		s.handle("POST "+k.path+"/{id}/resume", s.v1(s.admin(s.pauseRoute(k, false))))
		s.handle("GET "+k.path+"/{id}/blocked", s.v1(s.admin(s.listBlocked(k))))
		s.handle("POST "+k.path+"/{id}/blocked", s.v1(s.admin(s.blockUsers(k, true))))
		s.handle("POST "+k.path+"/{id}/blocked/remove", s.v1(s.admin(s.blockUsers(k, false))))
	}
}

// pauseOf pauses (or resumes) one kind of campaign and returns its
// answer, and for the log what it says of the pause.
type pauseOf func(ctx context.Context, id string, pause bool) (out any, said pauseSaid, err error)

// pauseSaid is what a pause's answer says, for the log.
type pauseSaid struct {
	state        hongbao.State
	pausedShards int
	overtaken    bool // a pause or resume that started later decided
}

// pauseRoute is the handler of a pause or resume of kind k.
func (s *Server) pauseRoute(k brakes, pause bool) func(http.ResponseWriter, *http.Request, string) {
	action := "resume"
	if pause {
		action = "pause"
	}
	return func(w http.ResponseWriter, r *http.Request, admin string) {
		s.onCampaign(w, r, s.actionTarget, func(ctx context.Context, id string) (any, error) {
			out, said, err := k.pause(ctx, id, pause)
			if err == nil {
				s.log.Info("admin action", "who", admin, "action", action, k.name, id,
					"state", said.state, "paused_shards", said.pausedShards, "overtaken", said.overtaken, "remote", s.remote(r))
			}
			return out, err
		})
	}
}

// pauseCampaign answers with the status and its settlement backlog, as
// GET /v1/campaigns/{id} does.
func (s *Server) pauseCampaign(ctx context.Context, id string, pause bool) (any, pauseSaid, error) {
	do := s.cfg.Engine.Resume
	if pause {
		do = s.cfg.Engine.Pause
	}
	st, err := do(ctx, id)
	if err != nil {
		return nil, pauseSaid{}, err
	}
	out, err := s.withBacklog(ctx, id, st)
	if err != nil {
		return nil, pauseSaid{}, err
	}
	return out, pauseSaid{st.State, st.PausedShards, st.Overtaken}, nil
}

func (s *Server) pauseDiscount(ctx context.Context, id string, pause bool) (any, pauseSaid, error) {
	do := s.cfg.Discounts.Resume
	if pause {
		do = s.cfg.Discounts.Pause
	}
	st, err := do(ctx, id)
	if err != nil {
		return nil, pauseSaid{}, err
	}
	return discountStatusJSON(st), pauseSaid{st.State, st.PausedShards, st.Overtaken}, nil
}

// blockRequest is the body of POST .../blocked and .../blocked/remove.
type blockRequest struct {
	Users []string `json:"users"`
}

var blockFields = jsonFields(reflect.TypeFor[blockRequest]())

// decodeBlock reads a block or unblock body: 1..MaxBlockUsers valid ids.
func decodeBlock(body []byte) ([]string, error) {
	var req blockRequest
	if err := decodeObject(body, &req, blockFields); err != nil {
		return nil, err
	}
	if len(req.Users) < 1 || len(req.Users) > hongbao.MaxBlockUsers {
		return nil, badRequest(CodeInvalidRequest, "users: give 1 to %d user ids", hongbao.MaxBlockUsers)
	}
	for _, u := range req.Users {
		if err := hongbao.ValidateUserID(u); err != nil {
			return nil, err
		}
	}
	return req.Users, nil
}

// blockOut answers a block (Added) or an unblock (Removed): how many
// users the call changed.
type blockOut struct {
	Campaign string `json:"campaign"`
	Added    *int   `json:"added,omitempty"`
	Removed  *int   `json:"removed,omitempty"`
}

func (s *Server) blockUsers(k brakes, add bool) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, admin string) {
		var users []string
		target := func(w http.ResponseWriter, r *http.Request) (id string, ok bool) {
			id, users, ok = bodyTarget(s, w, r, decodeBlock)
			return id, ok
		}
		s.onCampaign(w, r, target, func(ctx context.Context, id string) (any, error) {
			list := k.blocks()
			do, action := list.Unblock, "unblock"
			if add {
				do, action = list.Block, "block"
			}
			n, err := do(ctx, id, users)
			if err != nil {
				return nil, err
			}
			s.log.Info("admin action", "who", admin, "action", action, k.name, id,
				"users", len(users), "changed", n, "remote", s.remote(r))
			out := blockOut{Campaign: id, Removed: &n}
			if add {
				out.Added, out.Removed = &n, nil
			}
			return out, nil
		})
	}
}

// blockedOut answers GET .../blocked: a page of the users blocked, and
// how many are in all.
type blockedOut struct {
	Campaign string           `json:"campaign"`
	Users    []blockedUserOut `json:"users"`
	Total    int              `json:"total"`
	More     bool             `json:"more"`
}

type blockedUserOut struct {
	User  string `json:"user"`
	Since string `json:"since"`
}

func (s *Server) listBlocked(k brakes) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, _ string) {
		var p page
		target := func(w http.ResponseWriter, r *http.Request) (string, bool) {
			id, ok := s.idTarget(w, r)
			if !ok {
				return "", false
			}
			var err error
			if p, err = pageOf(r, maxBlockedListed); err != nil {
				s.fail(w, r, err)
				return "", false
			}
			return id, true
		}
		s.onCampaign(w, r, target, func(ctx context.Context, id string) (any, error) {
			us, total, err := k.blocks().BlockedPage(ctx, id, p.offset, p.limit)
			if err != nil {
				return nil, err
			}
			out := blockedOut{Campaign: id, Users: make([]blockedUserOut, len(us)), Total: total, More: p.offset+len(us) < total}
			for i, u := range us {
				out.Users[i] = blockedUserOut{User: u.User, Since: rfc3339(u.Since)}
			}
			return out, nil
		})
	}
}
