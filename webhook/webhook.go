package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

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
	// Name is the name of the wallet this sink settles into: the identity
	// (Identity) that a campaign settling here records as its owner at
	// create, and the "owner" of every event sent for such a campaign.
	// Deployments sharing one Redis tell their campaigns apart by it, so
	// it must stay the same across restarts and differ between wallets;
	// the host compares it with the owner of each event. Default:
	// DefaultName(URL), which a URL's restarts agree on and another URL
	// does not share. Printable, without whitespace, at most MaxNameLen
	// bytes.
	Name string
	// Logger hears each failed attempt that will be retried (the call's
	// error says the rest). Default: slog.Default().
	Logger *slog.Logger
}

// MaxNameLen bounds Config.Name, in bytes: a name travels in every event
// and is kept with every campaign.
const MaxNameLen = 256

// DefaultName is the Config.Name of a sink that sets none: "webhook:"
// and rawURL's scheme, host (in lower case) with its port if it has one,
// and path, as in "webhook:https://wallet.example/hongbao". Userinfo,
// query and fragment are left out, so the name never holds a secret; two
// spellings of one endpoint (an explicit default port, a trailing slash)
// are two names. It returns an error matching ErrConfig if rawURL is not
// an absolute http(s) URL.
func DefaultName(rawURL string) (string, error) {
	p, err := parseHTTPURL("Config.URL", rawURL)
	if err != nil {
		return "", err
	}
	return "webhook:" + p.Scheme + "://" + strings.ToLower(p.Host) + p.EscapedPath(), nil
}

// parseHTTPURL parses the absolute http(s) URL v of field name.
func parseHTTPURL(name, v string) (*url.URL, error) {
	p, err := url.Parse(v)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, &ConfigError{Field: name, Reason: "is not an absolute http(s) URL"}
	}
	return p, nil
}

// validateName checks a Config.Name: not empty, at most MaxNameLen bytes
// of printable UTF-8 without whitespace, so it reads the same in a log, a
// JSON body and a Redis hash.
func validateName(name string) error {
	switch {
	case name == "":
		return &ConfigError{Field: "Config.Name", Reason: "must not be empty"}
	case len(name) > MaxNameLen:
		return &ConfigError{Field: "Config.Name", Value: fmt.Sprintf("%d bytes", len(name)), Reason: fmt.Sprintf("must be at most %d bytes (set a shorter Config.Name)", MaxNameLen)}
	case !utf8.ValidString(name):
		return &ConfigError{Field: "Config.Name", Value: strconv.Quote(name), Reason: "must be UTF-8"}
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return &ConfigError{Field: "Config.Name", Value: strconv.Quote(name), Reason: fmt.Sprintf("must hold printable characters without whitespace, not %U", r)}
		}
	}
	return nil
}

// Validate reports whether c, with its defaults applied, can be used.
func (c Config) Validate() error {
	if _, err := parseHTTPURL("Config.URL", c.URL); err != nil {
		return err
	}
	if c.PingURL != "" {
		if _, err := parseHTTPURL("Config.PingURL", c.PingURL); err != nil {
			return err
		}
	}
	c = c.withDefaults()
	if err := validateName(c.Name); err != nil {
		return err
	}
	switch {
	case len(c.Secret) < MinSecretLen:
		return &ConfigError{Field: "Config.Secret", Value: fmt.Sprintf("%d bytes", len(c.Secret)), Reason: fmt.Sprintf("must have at least %d bytes", MinSecretLen)}
	case c.MaxAttempts < 1:
		return &ConfigError{Field: "Config.MaxAttempts", Value: strconv.Itoa(c.MaxAttempts), Reason: "must be at least 1"}
	case c.BaseBackoff < 0 || c.MaxBackoff < c.BaseBackoff:
		return &ConfigError{Field: "Config.BaseBackoff", Value: c.BaseBackoff.String(), Reason: fmt.Sprintf("must be within 0 and Config.MaxBackoff (%s)", c.MaxBackoff)}
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
	if c.Name == "" {
		c.Name, _ = DefaultName(c.URL) // Validate reports a bad URL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Sink delivers settlement events to a host's URL. It implements the
// settle worker's Sink interface (Fund, ApplyGrants, Refund, Ping), says
// which wallet it settles into (Identity) and asks the host what it holds
// of a campaign (Totals), for a reconcile. It is safe for concurrent use.
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

// Identity returns the sink's Config.Name: what a campaign that settles
// into this wallet records as its owner, so that a scheduler sharing a
// Redis with other deployments settles only the campaigns that are its
// own. It asks the host nothing and never fails; the error is there for
// sinks whose identity is stored remotely, such as a ledger's.
func (s *Sink) Identity(context.Context) (string, error) {
	return s.cfg.Name, nil
}

// owner returns the owner ctx carries (ledger.WithOwner) for an event of
// campaign: "" when it carries none, and a *ledger.ForeignError
// (ledger.ErrForeign) when it is not this sink's Name: the campaign
// settles into another wallet, and sending its money here would pay its
// users twice. Like an invalid argument, a foreign campaign is not an
// outage, so Ping will not report one for it.
func (s *Sink) owner(ctx context.Context, campaign string) (string, error) {
	o, ok := ledger.OwnerFrom(ctx)
	if !ok {
		return "", nil
	}
	if o != s.cfg.Name {
		s.down.Store(nil)
		return "", &ledger.ForeignError{Campaign: campaign, Owner: o, Ledger: s.cfg.Name}
	}
	return o, nil
}

// GrantKey is the idempotency key of one grant: "<campaign>/<seq>". The
// host must apply each key at most once.
func GrantKey(campaign string, seq int64) string {
	return campaign + "/" + strconv.FormatInt(seq, 10)
}

// Fund sends the campaign's fund event (key "<campaign>/fund"). It
// returns ledger.ErrInvalid for an empty id or funding account or a
// negative total, and a *ledger.ForeignError when ctx carries an owner
// that is not this sink's Name, without sending anything. An owner ctx
// carries is the event's "owner".
func (s *Sink) Fund(ctx context.Context, c ledger.Campaign) error {
	if c.ID == "" || c.Funding == "" || c.Total < 0 {
		s.down.Store(nil)
		return fmt.Errorf("%w: fund campaign %q from %q with %d cents", ledger.ErrInvalid, c.ID, c.Funding, c.Total)
	}
	owner, err := s.owner(ctx, c.ID)
	if err != nil {
		return err
	}
	key := c.ID + "/fund"
	body, err := json.Marshal(FundEvent{
		Type: EventFund, Campaign: c.ID, Owner: owner, Funding: c.Funding,
		TotalCents: c.Total, Amount: money.FormatCents(c.Total), IdempotencyKey: key,
	})
	if err != nil {
		return fmt.Errorf("webhook: fund: %w", err)
	}
	_, err = s.deliver(ctx, EventFund, key, body)
	return err
}

// Refund sends the campaign's refund event (key "<campaign>/refund").
// cents may be 0: the refund is then a record that the campaign is
// settled. It returns ledger.ErrInvalid for an empty campaign or negative
// cents, and a *ledger.ForeignError for a foreign owner (see Fund),
// without sending anything.
func (s *Sink) Refund(ctx context.Context, campaign string, cents int64) error {
	if campaign == "" || cents < 0 {
		s.down.Store(nil)
		return fmt.Errorf("%w: refund %d cents of campaign %q", ledger.ErrInvalid, cents, campaign)
	}
	owner, err := s.owner(ctx, campaign)
	if err != nil {
		return err
	}
	key := campaign + "/refund"
	body, err := json.Marshal(RefundEvent{
		Type: EventRefund, Campaign: campaign, Owner: owner, Cents: cents, Amount: money.FormatCents(cents), IdempotencyKey: key,
	})
	if err != nil {
		return fmt.Errorf("webhook: refund: %w", err)
	}
	_, err = s.deliver(ctx, EventRefund, key, body)
	return err
}

// ApplyGrants sends a batch of one campaign's grants in one request, each
// grant with its idempotency key "<campaign>/<seq>"; an empty Campaign
// field means the batch's campaign. An invalid batch (empty campaign,
// a grant of another campaign, no user, negative seq, cents <= 0) is
// refused with ledger.ErrInvalid before sending, as the ledger would, and
// so is a batch whose ctx carries a foreign owner, with a
// *ledger.ForeignError (see Fund), even an empty one.
//
// On a 2xx answer every grant the host did not list as a conflict counts
// as Inserted, with its cents in InsertedCents, and Replayed stays 0: the
// host dedupes by key, so a replay and a new grant look alike from here.
// Conflicts come from an optional JSON reply, a GrantsReply:
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
	owner, err := s.owner(ctx, campaign)
	if err != nil {
		return ledger.ApplyResult{}, err
	}
	if len(grants) == 0 {
		return ledger.ApplyResult{}, nil
	}
	b, err := newGrantsBatch(campaign, owner, grants)
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

	reply, err := s.deliver(ctx, EventGrants, key, body)
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
	wire     GrantsEvent
	byKey    map[string]int
}

// newGrantsBatch checks a batch as the ledger would and builds its event;
// a bad grant is ledger.ErrInvalid.
func newGrantsBatch(campaign, owner string, grants []ledger.Grant) (*grantsBatch, error) {
	b := &grantsBatch{
		campaign: campaign,
		grants:   make([]ledger.Grant, len(grants)),
		wire:     GrantsEvent{Type: EventGrants, Campaign: campaign, Owner: owner, Grants: make([]Grant, len(grants))},
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
		b.wire.Grants[i] = Grant{
			IdempotencyKey: key, Campaign: campaign, Seq: g.Seq, User: g.User,
			Cents: g.Cents, Amount: money.FormatCents(g.Cents),
		}
	}
	return b, nil
}

// result counts the batch as the host answered it: the grants it listed
// as conflicts are refused (keys not in the batch, and repeats, are
// ignored), the others inserted.
func (b *grantsBatch) result(conflicts []ConflictReply) ledger.ApplyResult {
	var res ledger.ApplyResult
	refused := make([]bool, len(b.grants))
	for _, c := range conflicts {
		i, ok := b.byKey[c.IdempotencyKey]
		if !ok || refused[i] {
			continue
		}
		refused[i] = true
		kind := c.Reason
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

// parseConflicts reads the conflicts of a GrantsReply; a reply that is
// not a JSON object has none.
func parseConflicts(reply []byte) ([]ConflictReply, error) {
	reply = bytes.TrimSpace(reply)
	if len(reply) == 0 || reply[0] != '{' {
		return nil, nil
	}
	var r GrantsReply
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
