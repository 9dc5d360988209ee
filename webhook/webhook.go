package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/money"
)

// Config configures a Sink. Zero fields take their documented defaults.
type Config struct {
	// URL receives every event as a POST. Required; http or https.
	URL string
	// Secret signs every attempt (HMAC-SHA256). Required, at least
	// MinSecretLen (32) bytes; New copies it.
	Secret []byte
	// Client sends the requests. Its Timeout bounds one attempt, so set
	// one if you bring your own. Default: an http.Client with Timeout 10s
	// that does not follow redirects (a 3xx is then a refusal: a
	// redirected POST may turn into a GET and lose the signed body).
	Client *http.Client
	// MaxAttempts is how many times one event is sent before the call
	// gives up with ErrUnavailable. Default 8.
	MaxAttempts int
	// BaseBackoff is the pause after the first failed attempt; it doubles
	// after each further failure, with jitter. Default 100ms.
	BaseBackoff time.Duration
	// MaxBackoff caps the pause between attempts, Retry-After included.
	// Default 5s.
	MaxBackoff time.Duration
	// PingURL, if set, is what Ping GETs (signed over an empty body); a
	// 2xx answer means the host is up. Default: none; Ping then reports
	// whether the last call failed for want of a reachable host.
	PingURL string
	// Clock gives the time the timestamps are signed with (and the one a
	// Retry-After date is read against). Default: time.Now.
	Clock func() time.Time
}

// Validate reports whether c, with its defaults applied, can be used.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, u := range []struct{ name, v string }{{"URL", c.URL}, {"PingURL", c.PingURL}} {
		if u.v == "" && u.name == "PingURL" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%w: %s %q is not an absolute http(s) URL", ErrConfig, u.name, u.v)
		}
	}
	switch {
	case len(c.Secret) < MinSecretLen:
		return fmt.Errorf("%w: Secret has %d bytes, want at least %d", ErrConfig, len(c.Secret), MinSecretLen)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts %d", ErrConfig, c.MaxAttempts)
	case c.BaseBackoff < 0 || c.MaxBackoff < c.BaseBackoff:
		return fmt.Errorf("%w: BaseBackoff %s must be between 0 and MaxBackoff %s", ErrConfig, c.BaseBackoff, c.MaxBackoff)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Client == nil {
		c.Client = &http.Client{
			Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 8
	}
	if c.BaseBackoff == 0 {
		c.BaseBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// Sink delivers settlement events to a host's URL. It implements the
// settle worker's Sink interface (Fund, ApplyGrants, Refund, Ping) and is
// safe for concurrent use.
type Sink struct {
	cfg Config

	// down holds the outage the last call ended in, or nil: see Ping.
	down atomic.Pointer[error]

	// wait pauses between attempts; tests replace it to record pauses.
	wait func(ctx context.Context, d time.Duration) error
}

// New returns a Sink for cfg, or an error matching ErrConfig.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Secret = bytes.Clone(cfg.Secret)
	return &Sink{cfg: cfg, wait: sleep}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Event types, the "type" field of every body.
const (
	eventFund   = "fund"
	eventGrants = "grants"
	eventRefund = "refund"
)

type fundBody struct {
	Type           string `json:"type"`
	Campaign       string `json:"campaign"`
	Funding        string `json:"funding"`
	TotalCents     int64  `json:"total_cents"`
	Amount         string `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
}

type grantsBody struct {
	Type     string      `json:"type"`
	Campaign string      `json:"campaign"`
	Grants   []grantBody `json:"grants"`
}

type grantBody struct {
	IdempotencyKey string `json:"idempotency_key"`
	Campaign       string `json:"campaign"`
	Seq            int64  `json:"seq"`
	User           string `json:"user"`
	Cents          int64  `json:"cents"`
	Amount         string `json:"amount"`
}

type refundBody struct {
	Type           string `json:"type"`
	Campaign       string `json:"campaign"`
	Cents          int64  `json:"cents"`
	Amount         string `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
}

// GrantKey is the idempotency key of one grant: "<campaign>/<seq>". The
// host must apply each key at most once.
func GrantKey(campaign string, seq int64) string {
	return campaign + "/" + strconv.FormatInt(seq, 10)
}

// Fund sends the campaign's fund event (key "<campaign>/fund"). It
// returns ledger.ErrInvalid for an empty id or funding account or a
// negative total, without sending anything.
func (s *Sink) Fund(ctx context.Context, c ledger.Campaign) error {
	if c.ID == "" || c.Funding == "" || c.Total < 0 {
		s.down.Store(nil)
		return fmt.Errorf("%w: fund campaign %q from %q with %d cents", ledger.ErrInvalid, c.ID, c.Funding, c.Total)
	}
	key := c.ID + "/fund"
	body, err := json.Marshal(fundBody{
		Type: eventFund, Campaign: c.ID, Funding: c.Funding,
		TotalCents: c.Total, Amount: money.FormatCents(c.Total), IdempotencyKey: key,
	})
	if err != nil {
		return fmt.Errorf("webhook: fund: %w", err)
	}
	_, err = s.deliver(ctx, eventFund, key, body)
	return err
}

// Refund sends the campaign's refund event (key "<campaign>/refund").
// cents may be 0: the refund is then a record that the campaign is
// settled. It returns ledger.ErrInvalid for an empty campaign or negative
// cents, without sending anything.
func (s *Sink) Refund(ctx context.Context, campaign string, cents int64) error {
	if campaign == "" || cents < 0 {
		s.down.Store(nil)
		return fmt.Errorf("%w: refund %d cents of campaign %q", ledger.ErrInvalid, cents, campaign)
	}
	key := campaign + "/refund"
	body, err := json.Marshal(refundBody{
		Type: eventRefund, Campaign: campaign, Cents: cents, Amount: money.FormatCents(cents), IdempotencyKey: key,
	})
	if err != nil {
		return fmt.Errorf("webhook: refund: %w", err)
	}
	_, err = s.deliver(ctx, eventRefund, key, body)
	return err
}

// ApplyGrants sends a batch of one campaign's grants in one request, each
// grant with its idempotency key "<campaign>/<seq>"; an empty Campaign
// field means the batch's campaign. An invalid batch (empty campaign,
// a grant of another campaign, no user, negative seq, cents <= 0) is
// refused with ledger.ErrInvalid before sending, as the ledger would.
//
// On a 2xx answer every grant the host did not list as a conflict counts
// as Inserted, with its cents in InsertedCents, and Replayed stays 0: the
// host dedupes by key, so a replay and a new grant look alike from here.
// Conflicts come from an optional JSON reply
//
//	{"conflicts":[{"idempotency_key":"c1/7","reason":"packet_taken",
//	  "existing":{"seq":7,"user":"bob","cents":120}}]}
//
// in which reason is a ledger.ConflictKind (default ledger.PacketTaken)
// and existing is optional. Keys that are not in the batch, and repeats,
// are ignored. A 2xx body that does not start with '{' (say "OK") means
// no conflicts; one that does but is not such an object is ErrReply.
func (s *Sink) ApplyGrants(ctx context.Context, campaign string, grants []ledger.Grant) (ledger.ApplyResult, error) {
	if campaign == "" {
		s.down.Store(nil)
		return ledger.ApplyResult{}, fmt.Errorf("%w: empty campaign id", ledger.ErrInvalid)
	}
	if len(grants) == 0 {
		return ledger.ApplyResult{}, nil
	}
	b, err := newGrantsBatch(campaign, grants)
	if err != nil {
		s.down.Store(nil)
		return ledger.ApplyResult{}, err
	}
	body, err := json.Marshal(b.wire)
	if err != nil {
		return ledger.ApplyResult{}, fmt.Errorf("webhook: grants: %w", err)
	}
	sum := sha256.Sum256(body)
	key := fmt.Sprintf("%s/grants/%d-%d-%s", campaign, b.grants[0].Seq, b.grants[len(b.grants)-1].Seq, hex.EncodeToString(sum[:4]))

	reply, err := s.deliver(ctx, eventGrants, key, body)
	if err != nil {
		return ledger.ApplyResult{}, err
	}
	conflicts, err := parseConflicts(reply)
	if err != nil {
		return ledger.ApplyResult{}, fmt.Errorf("webhook: grants %s: %w", key, err)
	}
	return b.result(conflicts), nil
}

// grantsBatch is one ApplyGrants call: the grants, their event, and the
// index of the first grant of each idempotency key.
type grantsBatch struct {
	campaign string
	grants   []ledger.Grant
	wire     grantsBody
	byKey    map[string]int
}

// newGrantsBatch checks a batch as the ledger would and builds its event;
// a bad grant is ledger.ErrInvalid.
func newGrantsBatch(campaign string, grants []ledger.Grant) (*grantsBatch, error) {
	b := &grantsBatch{
		campaign: campaign,
		grants:   make([]ledger.Grant, len(grants)),
		wire:     grantsBody{Type: eventGrants, Campaign: campaign, Grants: make([]grantBody, len(grants))},
		byKey:    make(map[string]int, len(grants)),
	}
	for i, g := range grants {
		if g.Campaign == "" {
			g.Campaign = campaign
		}
		var bad string
		switch {
		case g.Campaign != campaign:
			bad = fmt.Sprintf("grant seq %d of campaign %q in a batch of campaign %q", g.Seq, g.Campaign, campaign)
		case g.User == "":
			bad = fmt.Sprintf("grant seq %d has no user", g.Seq)
		case g.Seq < 0:
			bad = fmt.Sprintf("grant seq %d is negative", g.Seq)
		case g.Cents <= 0:
			bad = fmt.Sprintf("grant seq %d has %d cents", g.Seq, g.Cents)
		}
		if bad != "" {
			return nil, fmt.Errorf("%w: %s", ledger.ErrInvalid, bad)
		}
		b.grants[i] = g
		key := GrantKey(campaign, g.Seq)
		if _, dup := b.byKey[key]; !dup {
			b.byKey[key] = i
		}
		b.wire.Grants[i] = grantBody{
			IdempotencyKey: key, Campaign: campaign, Seq: g.Seq, User: g.User,
			Cents: g.Cents, Amount: money.FormatCents(g.Cents),
		}
	}
	return b, nil
}

// result counts the batch as the host answered it: the grants it listed
// as conflicts are refused (keys not in the batch, and repeats, are
// ignored), the others inserted.
func (b *grantsBatch) result(conflicts []conflictReply) ledger.ApplyResult {
	var res ledger.ApplyResult
	refused := make([]bool, len(b.grants))
	for _, c := range conflicts {
		i, ok := b.byKey[c.Key]
		if !ok || refused[i] {
			continue
		}
		refused[i] = true
		kind := ledger.ConflictKind(c.Reason)
		if kind == "" {
			kind = ledger.PacketTaken
		}
		conflict := ledger.Conflict{Grant: b.grants[i], Kind: kind}
		if c.Existing != nil {
			conflict.Existing = ledger.Grant{Campaign: b.campaign, Seq: c.Existing.Seq, User: c.Existing.User, Cents: c.Existing.Cents}
		}
		res.Conflicts = append(res.Conflicts, conflict)
	}
	for i, g := range b.grants {
		if !refused[i] {
			res.Inserted++
			res.InsertedCents += g.Cents
		}
	}
	return res
}

type conflictReply struct {
	Key      string `json:"idempotency_key"`
	Reason   string `json:"reason"`
	Existing *struct {
		Seq   int64  `json:"seq"`
		User  string `json:"user"`
		Cents int64  `json:"cents"`
	} `json:"existing"`
}

func parseConflicts(reply []byte) ([]conflictReply, error) {
	reply = bytes.TrimSpace(reply)
	if len(reply) == 0 || reply[0] != '{' {
		return nil, nil
	}
	var r struct {
		Conflicts []conflictReply `json:"conflicts"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReply, err)
	}
	return r.Conflicts, nil
}

// Ping answers the settle worker's question after a failed call: was it
// an outage (error: keep the entries and retry later) or a refusal (nil:
// the host, or this package, refused that batch, which the worker then
// splits and dead-letters)?
//
// With Config.PingURL, Ping GETs it, signed over an empty body, and
// returns nil on 2xx and an ErrUnavailable otherwise. Without it, Ping
// sends nothing and returns the outage the last call ended in: an error
// matching ErrUnavailable if that call's last attempt met a network
// error, a timeout, 408, 429 or 5xx; nil if it ended with an answer the
// host meant (2xx or another 4xx), with an invalid argument, or if there
// was no call yet. We chose that over probing the URL because only the
// host's answer to a real event tells a refusal from an outage: a GET on
// an endpoint that only takes POSTs says little. The state is the Sink's,
// not a call's: with concurrent calls Ping reflects whichever finished
// last.
func (s *Sink) Ping(ctx context.Context) error {
	if s.cfg.PingURL == "" {
		if p := s.down.Load(); p != nil {
			return *p
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.PingURL, nil)
	if err != nil {
		return fmt.Errorf("webhook: ping: %w", err)
	}
	s.sign(req, nil)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: ping: %w", ErrUnavailable, err)
	}
	excerpt := drain(resp)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w: ping: %d %s: %q", ErrUnavailable, resp.StatusCode, http.StatusText(resp.StatusCode), excerpt)
	}
	return nil
}
