package leader

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Holder is who holds a lease, as Redis says now.
type Holder struct {
	// Token is the fencing token of the holding; 0 when nobody holds the
	// lease.
	Token int64
	// ID is the holder's Config.ID, "" when its note is missing or names
	// another holding (a holder that has not written it yet).
	ID string
	// TTL is how long the lease lasts unless renewed.
	TTL time.Duration
}

// Holder reads who holds the lease now: its token, its ID and the time it
// has left, without changing anything. A lease nobody holds is the zero
// Holder.
func (e *Elector) Holder(ctx context.Context) (Holder, error) {
	c := e.cfg.Redis
	res := c.DoMulti(ctx, c.B().Get().Key(e.mark).Build(), c.B().Pttl().Key(e.mark).Build(), c.B().Get().Key(e.note).Build())
	mark, err := res[0].ToString()
	if rueidis.IsRedisNil(err) {
		return Holder{}, nil
	}
	if err != nil {
		return Holder{}, fmt.Errorf("leader: read the holder of %s: %w", e.cfg.Name, err)
	}
	ttl, err := res[1].AsInt64()
	if err != nil {
		return Holder{}, fmt.Errorf("leader: read the holder of %s: %w", e.cfg.Name, err)
	}
	token, ok := strings.CutPrefix(mark, "c:")
	h := Holder{TTL: time.Duration(max(ttl, 0)) * time.Millisecond}
	if h.Token, err = strconv.ParseInt(token, 10, 64); !ok || err != nil {
		return Holder{}, fmt.Errorf("leader: the mark of %s holds %q: something other than an Elector wrote it", e.cfg.Name, mark)
	}
	note, err := res[2].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return Holder{}, fmt.Errorf("leader: read the holder of %s: %w", e.cfg.Name, err)
	}
	if t, id, ok := strings.Cut(note, " "); ok && t == token {
		h.ID = id
	}
	return h, nil
}

// writeNote writes the holder's note of token, in the background: it
// decides nothing, so neither the renewal nor the loop waits for it (Stop
// does).
func (e *Elector) writeNote(ctx context.Context, token int64) {
	e.notes.Add(1)
	go func() {
		defer e.notes.Done()
		c := e.cfg.Redis
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(e.cfg.RenewEvery, e.cfg.TTL/5))
		defer cancel()
		err := c.Do(ctx, c.B().Set().Key(e.note).Value(strconv.FormatInt(token, 10)+" "+e.cfg.ID).Px(e.cfg.TTL).Build()).Error()
		if err != nil && !errors.Is(err, context.Canceled) {
			e.log.Debug("cannot write the holder's note", "err", err)
		}
	}()
}
