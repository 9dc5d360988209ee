package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// maxReply bounds how much of a 2xx answer is read for conflicts.
	maxReply = 1 << 20
	// maxExcerpt bounds the part of an error answer kept in errors.
	maxExcerpt = 256
	// maxDrain bounds what is read and dropped so the connection can be
	// reused.
	maxDrain = 64 << 10
)

// deliver POSTs body until the host answers 2xx (it returns the answer's
// body), refuses it for good (*RejectedError), the attempts run out
// (ErrUnavailable wrapping the last failure) or ctx ends (ctx's error,
// with the last failure). Every attempt is signed afresh.
func (s *Sink) deliver(ctx context.Context, event, key string, body []byte) ([]byte, error) {
	var last error
	for attempt := 1; ; attempt++ {
		reply, retryAfter, err := s.attempt(ctx, key, body)
		var rejected *RejectedError
		switch {
		case err == nil:
			s.down.Store(nil)
			return reply, nil
		case ctx.Err() != nil:
			// Our caller gave up, which says nothing about the host.
			return nil, fmt.Errorf("webhook: %s %s: %w", event, key, ctx.Err())
		case errors.As(err, &rejected):
			s.down.Store(nil)
			rejected.Event = event
			return nil, rejected
		}
		last = err
		if attempt >= s.cfg.MaxAttempts {
			out := fmt.Errorf("%w: %s %s: %d attempts, last: %w", ErrUnavailable, event, key, attempt, last)
			s.down.Store(&out)
			return nil, out
		}
		// Mark the outage now, so a Ping during the retries sees it too.
		down := fmt.Errorf("%w: %s %s: attempt %d: %w", ErrUnavailable, event, key, attempt, last)
		s.down.Store(&down)
		pause := s.backoff(attempt, retryAfter)
		s.cfg.Logger.Warn("webhook: attempt failed; retrying", "event", event, "key", key, "attempt", attempt,
			"max_attempts", s.cfg.MaxAttempts, "retry_in", pause, "err", err)
		if err := s.wait(ctx, pause); err != nil {
			return nil, fmt.Errorf("webhook: %s %s: %w (after %d attempts, last: %w)", event, key, err, attempt, last)
		}
	}
}

// attempt sends body once. err is nil on 2xx, a *RejectedError on a
// status that retrying will not change, and any other error is worth a
// retry; retryAfter is the host's Retry-After, or -1.
func (s *Sink) attempt(ctx context.Context, key string, body []byte) (reply []byte, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		// A bad URL or method: the next attempt would fail alike.
		return nil, -1, &RejectedError{Key: key, Body: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, key)
	s.sign(req, body)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, -1, err
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code/100 == 2:
		reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
		if err != nil {
			// The host may have applied it; resending is safe (keys).
			return nil, -1, fmt.Errorf("reading the %d answer: %w", code, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return reply, -1, nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code/100 == 5:
		excerpt := drain(resp)
		return nil, s.retryAfter(resp.Header.Get("Retry-After")),
			fmt.Errorf("%d %s: %q", code, http.StatusText(code), excerpt)
	default:
		return nil, -1, &RejectedError{Key: key, Status: code, Body: drain(resp)}
	}
}

// sign stamps req with the current time and the signature over it and
// body.
func (s *Sink) sign(req *http.Request, body []byte) {
	ts := s.cfg.Clock().Unix()
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(s.cfg.Secret, ts, body))
}

// backoff is the pause after failed attempt n (1-based): the host's
// Retry-After if it gave one, else BaseBackoff doubled n-1 times with
// "equal jitter" (a random point in its upper half, so many workers that
// failed together do not retry together); MaxBackoff caps both.
func (s *Sink) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return min(retryAfter, s.cfg.MaxBackoff)
	}
	d := s.cfg.BaseBackoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return d
}

// retryAfter reads a Retry-After value, in seconds or as an HTTP date;
// -1 if absent or unreadable.
func (s *Sink) retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return -1
		}
		if secs > int64(s.cfg.MaxBackoff/time.Second)+1 {
			return s.cfg.MaxBackoff // and no overflow
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(s.cfg.Clock()), 0)
	}
	return -1
}

// drain reads and closes the body of an answer we do not use, keeping a
// short excerpt for errors.
func drain(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
}
