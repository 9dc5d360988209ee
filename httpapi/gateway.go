package httpapi

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"sync"

	"github.com/hongbao/hongbao"
)

// The gateway's batch of grabs: a platform's access layer, which has
// authenticated its users itself, hands many of them to one request
// (POST /v1/campaigns/{id}/grabs) under a gateway key. Each user is
// grabbed by grabOp, the single grab's operation, so the engine coalesces
// the batch's users into script calls as it does concurrent single grabs,
// and its observers (metrics, traces) and the console's live counts see
// every user.

// MaxGrabBatch is the most users one batch of grabs names.
const MaxGrabBatch = 1000

// grabsRoute is the pattern of the gateway's batch of grabs.
const grabsRoute = "POST /v1/campaigns/{id}/grabs"

// maxGrabsBody caps the body of a batch: MaxGrabBatch user ids of at
// most 64 bytes, quoted and separated, with room for whitespace and
// escapes; Config.MaxBodyBytes when larger.
const maxGrabsBody = 256 << 10

var (
	errNeedGatewayKey = &requestError{code: CodeUnauthorized, msg: "a valid gateway key is required"}
	errUserNotGateway = &requestError{code: CodeForbidden, msg: "this route takes a gateway key, not a user token"}
)

// gatewayGate authenticates a platform's gateway (a gateway key or an
// admin key). A user's token is refused as forbidden: a user who could
// name other users would grab for them.
func (s *Server) gatewayGate(in inbound) (string, refusal) {
	who, err := s.gateways.match(in.header)
	if err == nil {
		return who, refusal{}
	}
	if _, uerr := s.users.user(in.header); uerr == nil {
		return "", s.authFailed(in, "gateway", errors.New("a user token"), errUserNotGateway)
	}
	return "", s.authFailed(in, "gateway", err, errNeedGatewayKey)
}

// gateway authenticates a platform's gateway (a gateway key or an admin
// key); a user's own token answers 403.
func (s *Server) gateway(next authedHandler) http.HandlerFunc { return s.authed(s.gatewayGate, next) }

// grabsRequest is the body of a batch of grabs.
type grabsRequest struct {
	Users []string `json:"users"`
}

var grabsFields = jsonFields(reflect.TypeFor[grabsRequest]())

// decodeGrabs reads a batch's body: 1..MaxGrabBatch valid user ids,
// repeats allowed. One bad id refuses the whole batch.
func decodeGrabs(body []byte) ([]string, error) {
	var req grabsRequest
	if err := decodeStrict(body, &req, grabsFields); err != nil {
		return nil, err
	}
	if err := checkGrabUsers(req.Users, "users"); err != nil {
		return nil, err
	}
	return req.Users, nil
}

// checkGrabUsers refuses a batch's users unless they are 1..MaxGrabBatch
// valid user ids; field names them in the answer.
func checkGrabUsers(users []string, field string) error {
	if len(users) < 1 || len(users) > MaxGrabBatch {
		return badRequest(CodeInvalidRequest, "%s: give 1 to %d user ids", field, MaxGrabBatch)
	}
	for i, u := range users {
		if err := hongbao.ValidateUserID(u); err != nil {
			return badRequest(CodeInvalidRequest, "%s[%d]: user ids are 1 to 64 of A-Z a-z 0-9 _ - . : @", field, i)
		}
	}
	return nil
}

// batchResult is one user's answer in a batch: a grab's Grant, or, for
// a user past the per-user limit, limited (nothing was attempted).
type batchResult struct {
	grant   hongbao.Grant
	limited bool
}

// grabBatchOp grabs a packet of campaign id for each of users, in their
// order, repeats allowed. Each user spends the per-user limit as a
// single grab does; a user past it is answered limited and not grabbed.
// The users are grabbed concurrently, so that the engine coalesces them;
// a user named twice is grabbed again once the first grab answered, and
// is answered as a single grab repeated (already_granted, the same
// packet). If any grab fails the batch answers its error (the first in
// the users' order): the others may have been granted, and a retry of
// the batch answers them already_granted with the same packets.
func (s *Server) grabBatchOp(ctx context.Context, id string, users []string) ([]batchResult, error) {
	// One deadline bounds the whole batch (Config.Timeout, as a single
	// grab): each grab then finds an earlier deadline and makes no
	// context of its own (grabOp); a timer each cost a fifth of a batch's
	// CPU, a cancel context each still a sixth of serve's.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	out := make([]batchResult, len(users))
	errs := make([]error, len(users))
	now := s.cfg.Now()
	// rounds[k] are the indexes of the users' k-th mentions.
	var rounds [][]int
	seen := make(map[string]int, len(users))
	for i, u := range users {
		if ok, _ := s.userLim.allow(u, now); !ok {
			s.metrics.limited.WithLabelValues("user").Inc()
			s.live.store.record(id, liveLimited, 0, now)
			out[i].limited = true
			continue
		}
		k := seen[u]
		seen[u] = k + 1
		if k == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[k] = append(rounds[k], i)
	}
	for _, round := range rounds {
		var wg sync.WaitGroup
		for _, i := range round {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i].grant, errs[i] = s.grabOp(ctx, id, users[i])
			}()
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) grabBatch(w http.ResponseWriter, r *http.Request, _ string) {
	id, err := campaignID(r)
	var users []string
	if err == nil {
		var body []byte
		if body, err = readBody(w, r, max(s.cfg.MaxBodyBytes, maxGrabsBody)); err == nil {
			users, err = decodeGrabs(body)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.grabBatchOp(r.Context(), id, users)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b := make([]byte, 0, 16+len(res)*96)
	b = append(b, `{"results":[`...)
	for i, x := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBatchResult(b, users[i], x)
	}
	b = append(b, "]}\n"...)
	writeBody(w, http.StatusOK, b)
}

// appendBatchResult encodes one user's answer: the grab's outcome and,
// with a packet, its id and amount; or a per-user error code.
func appendBatchResult(b []byte, user string, x batchResult) []byte {
	// User ids are checked (ValidateUserID): nothing in one needs
	// escaping.
	b = append(b, `{"user_id":"`...)
	b = append(b, user...)
	b = append(b, '"')
	if x.limited {
		return append(b, `,"error":"`+CodeRateLimited+`"}`...)
	}
	g := x.grant
	b = append(b, `,"outcome":"`...)
	b = append(b, g.Outcome.String()...)
	b = append(b, '"')
	if g.Outcome.HasPacket() {
		b = append(b, `,"packet_id":"`...)
		b = append(b, g.Campaign...)
		b = append(b, '/')
		b = strconv.AppendInt(b, g.Seq, 10)
		b = append(b, `","amount":"`...)
		b = hongbao.AppendCents(b, g.Cents)
		b = append(b, `","amount_cents":`...)
		b = strconv.AppendInt(b, g.Cents, 10)
	}
	return append(b, '}')
}
