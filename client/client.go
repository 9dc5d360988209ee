package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Options configure a Client. The zero value of every field is its
// default.
type Options struct {
	// Token is the credential sent as "Authorization: Bearer <Token>": a
	// user's JWT, the payment key or an admin key. Empty: none (the
	// routes that need none, and As gives one per call).
	Token string
	// HTTPClient sends the requests. Default: a client of its own with a
	// 30 s timeout per attempt, on http.DefaultTransport; under Connect
	// and GRPC the procedures go over a transport of their own that
	// speaks HTTP/2 (TLS on https:// URLs, h2c on http:// ones). A client
	// given here carries the procedures too: for GRPC, and for a
	// Gateway's stream, its transport must speak HTTP/2 (on http:// URLs
	// set Protocols to unencrypted HTTP/2). A Gateway's stream is sent
	// without its Timeout.
	HTTPClient *http.Client
	// Protocol is what the grabs (Grab, a Gateway's batches and streams)
	// and the payment system's calls (Reserve, Confirm, Cancel) speak:
	// JSON (default), Connect or GRPC. The answers and errors are the
	// same whichever it is; every other call speaks JSON.
	Protocol Protocol
	// Retry bounds the retries. Default: DefaultRetry.
	Retry Retry
	// UserAgent is sent as User-Agent. Default "hongbao-client-go".
	UserAgent string
	// Propagate, when set, adds the caller's trace context to each
	// request's header, so the service's spans join the caller's trace.
	// With OpenTelemetry:
	//
	//	Propagate: func(ctx context.Context, h http.Header) {
	//		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	//	}
	//
	// Default: nothing is added (the client does not depend on
	// OpenTelemetry; see the package documentation).
	Propagate func(ctx context.Context, header http.Header)
}

// Retry bounds the retries of a call (see the package documentation for
// which calls are retried when).
type Retry struct {
	// MaxAttempts is the attempts of a call in all, the first included.
	// Default 5; 1 turns retries off.
	MaxAttempts int
	// MinBackoff is the wait before the first retry when the service gave
	// no Retry-After; it doubles with each retry. Default 50ms.
	MinBackoff time.Duration
	// MaxBackoff caps the backoff (not a Retry-After). Default 2s.
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; an answer that
	// asks more is returned, not waited for. Default 30s.
	MaxRetryAfter time.Duration
}

// DefaultRetry is the retry bound a Client has unless Options say
// otherwise.
var DefaultRetry = Retry{MaxAttempts: 5, MinBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, MaxRetryAfter: 30 * time.Second}

// NoRetry makes a Client send every call once.
var NoRetry = Retry{MaxAttempts: 1}

// Client calls one hongbao service. It is safe for concurrent use.
type Client struct {
	base  string // the service's URL, without a trailing slash
	auth  string // "Bearer <token>", or ""
	http  *http.Client
	retry Retry
	agent string
	prop  func(context.Context, http.Header)
	rpc   *rpcClients // nil under JSON
}

// New returns a client of the service at baseURL, such as
// "https://hongbao.internal:8080".
func New(baseURL string, o Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hongbao client: the base URL %q is not an http(s) URL", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: o.HTTPClient, retry: o.Retry, agent: o.UserAgent, prop: o.Propagate}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.retry.MaxAttempts < 0 || c.retry.MinBackoff < 0 || c.retry.MaxBackoff < 0 || c.retry.MaxRetryAfter < 0 {
		return nil, errors.New("hongbao client: negative retry bound")
	}
	d := DefaultRetry
	if c.retry.MaxAttempts == 0 {
		c.retry.MaxAttempts = d.MaxAttempts
	}
	if c.retry.MinBackoff == 0 {
		c.retry.MinBackoff = d.MinBackoff
	}
	if c.retry.MaxBackoff == 0 {
		c.retry.MaxBackoff = d.MaxBackoff
	}
	if c.retry.MaxRetryAfter == 0 {
		c.retry.MaxRetryAfter = d.MaxRetryAfter
	}
	if c.agent == "" {
		c.agent = "hongbao-client-go"
	}
	if o.Token != "" {
		c.auth = "Bearer " + o.Token
	}
	if o.Protocol != JSON {
		rc, err := newRPCClients(c.base, o.Protocol, o.HTTPClient)
		if err != nil {
			return nil, err
		}
		c.rpc = rc
	}
	return c, nil
}

// As returns a copy of c that sends token as its credential, over the
// same HTTP client: a user's token for that user's grabs, say.
func (c *Client) As(token string) *Client {
	cp := *c
	cp.auth = ""
	if token != "" {
		cp.auth = "Bearer " + token
	}
	return &cp
}

// call is one API call: its route, whether the service makes it
// idempotent, its body and what its 2xx reply decodes into.
type call struct {
	method, path string
	idempotent   bool
	body         any    // marshalled to JSON; nil: no body
	key          string // Idempotency-Key, or ""
	out          any    // nil: the reply is not decoded
}

// do runs a call with the retry protocol.
func (c *Client) do(ctx context.Context, k call) error {
	var payload []byte
	if k.body != nil {
		var err error
		if payload, err = json.Marshal(k.body); err != nil {
			return fmt.Errorf("hongbao client: %s %s: %w", k.method, k.path, err)
		}
	}
	return c.retrying(ctx, k.idempotent, func() error { return c.attempt(ctx, k, payload) })
}

// retrying runs one attempt of a call, then more as the retry protocol
// allows, whatever the transport: idempotent says whether the service
// makes the call so.
func (c *Client) retrying(ctx context.Context, idempotent bool, attempt func() error) error {
	for n := 1; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		wait, ok := c.again(ctx, idempotent, err, n)
		if !ok {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// again says whether a failed attempt may be retried, and after how long.
func (c *Client) again(ctx context.Context, idempotent bool, err error, attempt int) (time.Duration, bool) {
	if attempt >= c.retry.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	switch classify(err) {
	case nothing, loadWait:
	case unknown:
		if !idempotent {
			return 0, false
		}
	default:
		return 0, false
	}
	wait := c.backoff(attempt)
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		if e.RetryAfter > c.retry.MaxRetryAfter {
			return 0, false
		}
		wait = e.RetryAfter
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false // the wait would outlive the caller
	}
	return wait, true
}

// backoff is the wait before retry number attempt: MinBackoff doubled per
// attempt, capped, and drawn between its half and itself so that clients
// cut off together do not come back together.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retry.MinBackoff
	for i := 1; i < attempt && d < c.retry.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.retry.MaxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// attempt sends a call once.
func (c *Client) attempt(ctx context.Context, k call, payload []byte) error {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, c.base+k.path, body)
	if err != nil {
		return fmt.Errorf("hongbao client: %w", err)
	}
	h := req.Header
	if c.auth != "" {
		h["Authorization"] = []string{c.auth}
	}
	if payload != nil {
		h["Content-Type"] = hdrJSON
	}
	if k.key != "" {
		h["Idempotency-Key"] = []string{k.key}
	}
	h["Accept"] = hdrJSON
	h["User-Agent"] = []string{c.agent}
	if c.prop != nil {
		c.prop(ctx, h)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxReply))
	if err != nil {
		return transportError(ctx, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return replyError(res, b)
	}
	if k.out == nil {
		return nil
	}
	if err := json.Unmarshal(b, k.out); err != nil {
		return fmt.Errorf("hongbao client: %s %s: the reply is not what the API describes: %w", k.method, k.path, err)
	}
	return nil
}

// maxReply bounds the bytes read of one reply (a list of 200 campaigns
// is about 200 KB).
const maxReply = 16 << 20

var hdrJSON = []string{"application/json"}

// transportError classifies an error of the transport: a connection that
// could not be made did nothing; anything later lost the reply.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The caller gave up: the call may have arrived all the same.
		return &lostError{err: err}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &notSentError{err: err}
	}
	return &lostError{err: err}
}

// replyError turns a non-2xx reply into an *Error.
func replyError(res *http.Response, b []byte) error {
	e := &Error{Status: res.StatusCode, RetryAfter: retryAfter(res.Header, time.Now())}
	var shape struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &shape) == nil && shape.Error.Code != "" {
		e.Code, e.Message = shape.Error.Code, shape.Error.Message
	} else {
		e.Message = http.StatusText(res.StatusCode)
	}
	return e
}

// newKey draws an Idempotency-Key.
func newKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return "hbc-" + hex.EncodeToString(b[:])
}
