package atomicop

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
)

var (
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/done.lua
	doneLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/extend.lua
	extendLua string
	// The Lua the scripts include (see luascript.Library).
	//go:embed lua/lib/*.lua
	libFiles embed.FS

	lib           = luascript.MustLibrary(libFiles, "lua/lib")
	claimScript   = lib.New(claimLua)
	doneScript    = lib.New(doneLua)
	releaseScript = lib.New(releaseLua)
	extendScript  = lib.New(extendLua)
)

// DefaultOncePrefix is the key prefix of a Once with no Prefix configured.
const DefaultOncePrefix = "hb:once:"

// MaxToken is the largest fencing token: 2^53 - 1, since the scripts
// compute tokens as Lua numbers (doubles, exact below 2^53). Tokens drawn
// from the Redis clock in microseconds reach it in the year 2255.
const MaxToken = 1<<53 - 1

// DefaultFenceTTL is how long a message's token counter outlives its last
// lease or delivered mark when OnceConfig.FenceTTL is zero.
const DefaultFenceTTL = 24 * time.Hour

// OnceConfig configures a Once. The zero value is the default.
type OnceConfig struct {
	// Prefix starts every Redis key the Once writes: <Prefix>{<id>}:mark
	// and <Prefix>{<id>}:fence. It must not contain braces.
	// Default: DefaultOncePrefix.
	Prefix string
	// FenceTTL is how long a message's token counter lives beyond its last
	// lease or delivered mark. Tokens grow by one at least while the
	// counter lives; a counter lost (expired, or gone with a failover)
	// starts again from the Redis clock (see Tokens in the package doc).
	// Default: DefaultFenceTTL.
	FenceTTL time.Duration
}

// Validate reports whether the configuration can be used.
func (c *OnceConfig) Validate() error {
	if err := checkPrefix(c.Prefix); err != nil {
		return err
	}
	if c.FenceTTL != 0 && c.FenceTTL < time.Millisecond {
		return fmt.Errorf("%w: FenceTTL %v, want at least 1ms", ErrDuration, c.FenceTTL)
	}
	return nil
}

// Once delivers each message once to a receiver, from many workers that may
// each be handed the same message, without the classic flaw of marking a
// message as pushed before pushing it (a worker that dies between the mark
// and the push loses the message for good).
//
// A worker calls Claim; the first caller wins a lease and a fencing token,
// pushes the message with its id and token, then calls Done, which marks
// the message delivered for a keep time, so later claims answer Delivered.
// A worker that cannot push calls Release, and another worker delivers the
// message. A worker that dies holds the message only until its lease runs
// out; then the message can be claimed again.
//
// The guarantee, stated honestly: no message is lost, provided some worker
// keeps trying every message that is not yet Delivered (a queue that
// redelivers unacknowledged messages does that). A message is pushed twice
// only in two cases, which leases cannot rule out: a worker dies after its
// push and before Done, or a worker stalls past its lease (a GC pause, a
// slow push) while another claims and pushes. So the receiver removes
// duplicates by the message id, and can use the token, which grows with
// every claim of a message, to tell a late push from a newer one. Delivered
// marks live in Redis: with a failover that loses recent writes, or a keep
// time shorter than the time duplicates can arrive, the same holds.
//
// What a worker does with each answer of Claim: Claimed, push and then
// Done (or Release when the push failed). Busy, another worker holds the
// lease: try again after Claim.TTL; or, when the message came from a queue
// that redelivers unacknowledged messages after a visibility timeout longer
// than the lease, acknowledge it and move on, since the holder's copy comes
// back if the holder dies. Delivered: acknowledge.
//
// Token checks run inside Redis, in Lua: one worker can neither confirm
// nor release another's claim, whatever the timing.
//
// A Once is safe for concurrent use.
type Once struct {
	client   rueidis.Client
	prefix   string
	fenceTTL time.Duration
}

// NewOnce returns a Once using client. A nil cfg means defaults.
func NewOnce(client rueidis.Client, cfg *OnceConfig) (*Once, error) {
	var c OnceConfig
	if cfg != nil {
		c = *cfg
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultOncePrefix)
	c.FenceTTL = cmp.Or(c.FenceTTL, DefaultFenceTTL)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Once{client: client, prefix: c.Prefix, fenceTTL: c.FenceTTL}, nil
}

// ClaimStatus is the state of a message as one caller sees it.
type ClaimStatus int

const (
	// Free means nobody holds a claim on the message (only in a
	// NotOwnerError).
	Free ClaimStatus = iota
	// Claimed means the caller won the lease and holds the token.
	Claimed
	// Busy means another worker holds an unexpired lease.
	Busy
	// Delivered means the message was delivered (Done) and the mark is
	// still kept.
	Delivered
)

// String returns the status in words.
func (s ClaimStatus) String() string {
	switch s {
	case Free:
		return "free"
	case Claimed:
		return "claimed"
	case Busy:
		return "busy"
	case Delivered:
		return "delivered"
	}
	return "ClaimStatus(" + strconv.Itoa(int(s)) + ")"
}

// Claim is the answer to a claim.
type Claim struct {
	// Status is Claimed, Busy or Delivered.
	Status ClaimStatus
	// Token is the fencing token when Claimed, else 0. Tokens of a message
	// grow with every claim (see Tokens in the package doc): at least the
	// Redis clock in microseconds since the epoch, in (0, MaxToken].
	Token int64
	// TTL is the lease when Claimed, the time left on the other worker's
	// lease when Busy (try again after it), and how long the delivered mark
	// is still kept when Delivered (-1: for ever).
	TTL time.Duration
}

// Claim asks for the lease of message id for lease (whole milliseconds,
// at least 1ms). The first caller wins: Status Claimed with a token. Later
// callers get Busy until the lease ends (by Done, Release or expiry), and
// Delivered once a Done has marked the message.
//
// Why a script and not a plain SET NX PX: SET mark NX PX lease alone elects
// one holder, and it suffices for a lock whose token is random. A fencing
// token must also grow with every claim, so that a receiver can tell a late
// worker's push from a newer one; it is drawn from a per-message counter,
// and drawing it and taking the mark must be one step, or a worker stalled
// between the two could install an older token after a newer claim had
// come and gone. Inside the script the mark is a plain SET with PX, so the
// lease expires by itself when its worker dies.
//
// The token is the largest of the counter plus one and the Redis clock in
// microseconds since the epoch, and the counter is raised to it: see
// Tokens in the package doc for what that promises when the counter is
// lost.
func (o *Once) Claim(ctx context.Context, id string, lease time.Duration) (Claim, error) {
	return o.ClaimAbove(ctx, id, lease, 0)
}

// ClaimAbove is Claim with a floor: a token it hands out is above floor
// too, and the counter is raised to it, so every later claim of the
// message draws a larger one. A caller that learns that a token was
// handed out twice (a receiver that recorded a token at least as large as
// the one it was given) claims again above the receiver's. floor is in
// [0, MaxToken): ErrInvalidToken otherwise.
func (o *Once) ClaimAbove(ctx context.Context, id string, lease time.Duration, floor int64) (Claim, error) {
	keys, err := o.keys("claim", id)
	if err != nil {
		return Claim{}, err
	}
	ms, err := millis("claim", "lease", lease)
	if err != nil {
		return Claim{}, err
	}
	if floor < 0 || floor >= MaxToken {
		return Claim{}, fmt.Errorf("atomicop: claim %q: %w: floor %d, want 0..%d", id, ErrInvalidToken, floor, MaxToken-1)
	}
	args := []string{ms, strconv.FormatInt(o.fenceTTL.Milliseconds(), 10), strconv.FormatInt(floor, 10)}
	out, err := runScript(ctx, o.client, "claim", claimScript, keys, args)
	if err != nil {
		return Claim{}, err
	}
	if len(out) != 3 || out[0] < int64(Claimed) || out[0] > int64(Delivered) {
		return Claim{}, fmt.Errorf("atomicop: claim %q: %w: reply %v", id, ErrCorrupt, out)
	}
	ttl := time.Duration(out[2]) * time.Millisecond
	if out[2] < 0 {
		ttl = -1
	}
	return Claim{Status: ClaimStatus(out[0]), Token: out[1], TTL: ttl}, nil
}

// Done confirms that the holder of token delivered message id, and keeps
// the delivered mark for keep (whole milliseconds, at least 1ms): claims
// within keep answer Delivered. Keep it longer than duplicates of the
// message can arrive.
//
// Done succeeds when token holds the claim, and also when its lease ran
// out but nobody claimed the message since (the push was then the only
// one). A repeated Done with the same token succeeds and changes nothing.
// Otherwise it returns a *NotOwnerError (errors.Is ErrNotOwner): another
// worker claimed the message after this lease ended, so the message may
// reach the receiver twice, and the receiver's removal of duplicates by id
// is what keeps it once.
func (o *Once) Done(ctx context.Context, id string, token int64, keep time.Duration) error {
	keys, err := o.keys("done", id)
	if err != nil {
		return err
	}
	if token <= 0 {
		return fmt.Errorf("atomicop: done %q: %w: %d", id, ErrInvalidToken, token)
	}
	ms, err := millis("done", "keep", keep)
	if err != nil {
		return err
	}
	fence := strconv.FormatInt(o.fenceTTL.Milliseconds(), 10)
	return o.settle(ctx, "done", doneScript, id, token, keys, []string{strconv.FormatInt(token, 10), ms, fence})
}

// Release hands message id back so that another worker delivers it: call it
// when the push failed and this worker will not retry it. It succeeds when
// token holds the claim, or when the lease already ran out and nobody
// claimed since. Otherwise it returns a *NotOwnerError, and changes
// nothing: a stale token cannot free another worker's claim, nor a
// delivered message.
func (o *Once) Release(ctx context.Context, id string, token int64) error {
	keys, err := o.keys("release", id)
	if err != nil {
		return err
	}
	if token <= 0 {
		return fmt.Errorf("atomicop: release %q: %w: %d", id, ErrInvalidToken, token)
	}
	return o.settle(ctx, "release", releaseScript, id, token, keys, []string{strconv.FormatInt(token, 10)})
}

// Extend renews the lease of token on message id to lease from now, for a
// push that takes longer than planned. It succeeds when token holds the
// claim, or its lease ran out and nobody claimed since (the claim is taken
// back); otherwise it returns a *NotOwnerError.
func (o *Once) Extend(ctx context.Context, id string, token int64, lease time.Duration) error {
	keys, err := o.keys("extend", id)
	if err != nil {
		return err
	}
	if token <= 0 {
		return fmt.Errorf("atomicop: extend %q: %w: %d", id, ErrInvalidToken, token)
	}
	ms, err := millis("extend", "lease", lease)
	if err != nil {
		return err
	}
	fence := strconv.FormatInt(o.fenceTTL.Milliseconds(), 10)
	return o.settle(ctx, "extend", extendScript, id, token, keys, []string{strconv.FormatInt(token, 10), ms, fence})
}

// settle runs a token-checking script, whose reply is {ok, now}.
func (o *Once) settle(ctx context.Context, op string, script *luascript.Script, id string, token int64, keys, args []string) error {
	out, err := runScript(ctx, o.client, op, script, keys, args)
	if err != nil {
		return err
	}
	if len(out) != 2 {
		return fmt.Errorf("atomicop: %s %q: %w: reply %v", op, id, ErrCorrupt, out)
	}
	if out[0] == 1 {
		return nil
	}
	return &NotOwnerError{ID: id, Token: token, Now: ClaimStatus(out[1])}
}

func (o *Once) keys(op, id string) ([]string, error) {
	mark, fence, err := messageKeys(o.prefix, id)
	if err != nil {
		return nil, fmt.Errorf("atomicop: %s: %w", op, err)
	}
	return []string{mark, fence}, nil
}

// millis renders d in whole milliseconds, refusing less than one.
func millis(op, what string, d time.Duration) (string, error) {
	if d < time.Millisecond {
		return "", fmt.Errorf("atomicop: %s: %w: %s %v, want at least 1ms", op, ErrDuration, what, d)
	}
	return strconv.FormatInt(d.Milliseconds(), 10), nil
}
