package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// MaxEventBytes bounds the body ReadEvent reads: 64 MiB, well above the
// largest grants batch a settle worker sends (its reads times the
// campaign's shards times a grab batch, some 150 bytes a grant). A host
// that wants a lower bound wraps r.Body in http.MaxBytesReader first.
const MaxEventBytes = 64 << 20

// Event is a request of the sink as a host receives it from ReadEvent:
// signed by the shared secret within the window, with its envelope read.
// Decode its Body into the struct of its Type.
type Event struct {
	// Type is one of EventFund, EventGrants, EventRefund, EventTotals, or
	// a type this version does not know (answer it 400).
	Type string
	// Campaign is the campaign the event is about.
	Campaign string
	// Owner is the owner the campaign recorded, or "" for none. A host
	// refuses an event whose Owner is set and is not its own name.
	Owner string
	// IdempotencyKey is the request's Idempotency-Key header; the keys
	// to dedupe by are in the body.
	IdempotencyKey string
	// Body is the request body as signed.
	Body []byte
}

// Decode decodes the event's body into v, which is a *FundEvent,
// *GrantsEvent, *RefundEvent or *TotalsEvent after its Type. An error
// matches ErrRequest.
func (e *Event) Decode(v any) error {
	if err := json.Unmarshal(e.Body, v); err != nil {
		return fmt.Errorf("%w: %s event: %w", ErrRequest, e.Type, err)
	}
	return nil
}

// ReadEvent is what a host's handler does first, in one call: it reads
// r's body (at most MaxEventBytes), checks its signature and timestamp as
// Verify does (window <= 0 means DefaultWindow, the clock skew allowed
// either way around now), and reads the envelope every event shares:
// type, campaign and owner.
//
// It returns an error matching ErrSignature or ErrExpired (answer 401:
// the request is not the sink's, or too old or too far in the future), or
// ErrRequest (answer 400: an unreadable or oversized body, or a signed one
// that is not an event, which the sink never sends).
func ReadEvent(secret []byte, r *http.Request, window time.Duration, now time.Time) (*Event, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxEventBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %w", ErrRequest, err)
	}
	if len(body) > MaxEventBytes {
		return nil, fmt.Errorf("%w: body above %d bytes", ErrRequest, MaxEventBytes)
	}
	if err := Verify(secret, r, body, window, now); err != nil {
		return nil, err
	}
	var env struct {
		Type     string `json:"type"`
		Campaign string `json:"campaign"`
		Owner    string `json:"owner"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: not an event: %w", ErrRequest, err)
	}
	if env.Type == "" || env.Campaign == "" {
		return nil, fmt.Errorf("%w: an event without type or campaign", ErrRequest)
	}
	return &Event{
		Type: env.Type, Campaign: env.Campaign, Owner: env.Owner,
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey), Body: body,
	}, nil
}
