package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// Errors of subscribing to a campaign's live view.
var (
	errTooManyWatchers = errors.New("too many live views are open")
	errLiveStopped     = errors.New("the server is stopping")
)

// liveReader reads a campaign's status and settlement backlog: one reading
// of Redis.
type liveReader func(ctx context.Context, id string) (*hongbao.Status, settle.Backlog, error)

// liveHub serves the console's live view. While a campaign has viewers, one
// sampler reads it from Redis every interval, encodes one event and hands
// the same bytes to every viewer; the cost to Redis does not grow with
// the viewers. A slow viewer misses readings (it gets the latest when it
// is ready) and never holds the others up.
type liveHub struct {
	store    *liveStore
	read     liveReader
	interval time.Duration
	timeout  time.Duration
	maxSubs  int
	log      *slog.Logger
	now      func() time.Time
	done     chan struct{}
	stopOnce sync.Once

	watched sync.Map // campaign id -> true while it has a sampler; read by the store's eviction
	mu      sync.Mutex
	watches map[string]*watch
	subs    int
	stopped bool
}

// watch is one campaign's sampler and its viewers.
type watch struct {
	id     string
	stats  *liveStats
	subs   map[*liveSub]struct{}
	cancel context.CancelFunc
	ended  chan struct{}
	last   []byte // the latest event, sent at once to a new viewer
	seq    int64
}

// liveSub is one viewer. ch holds the latest event not yet sent; it is
// closed after a last "gone" event when the campaign no longer exists.
type liveSub struct {
	w  *watch
	ch chan []byte
}

func newLiveHub(maxCampaigns, maxSubs int, interval, timeout time.Duration, read liveReader, log *slog.Logger, now func() time.Time) *liveHub {
	h := &liveHub{
		read: read, interval: interval, timeout: timeout, maxSubs: maxSubs, log: log, now: now,
		done: make(chan struct{}), watches: map[string]*watch{},
	}
	h.store = &liveStore{max: maxCampaigns, pinned: func(id string) bool {
		_, ok := h.watched.Load(id)
		return ok
	}}
	return h
}

// stop ends every live view: the viewers' handlers return, and with the
// last viewer of a campaign its sampler stops. It cannot be undone.
func (h *liveHub) stop() {
	h.stopOnce.Do(func() {
		h.mu.Lock()
		h.stopped = true
		h.mu.Unlock()
		close(h.done)
	})
}

// viewers is the number of open live views.
func (h *liveHub) viewers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs
}

// subscribe opens a live view of campaign id, starting its sampler if it
// has none.
func (h *liveHub) subscribe(id string) (*liveSub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return nil, errLiveStopped
	case h.subs >= h.maxSubs:
		return nil, errTooManyWatchers
	}
	w := h.watches[id]
	if w == nil {
		h.watched.Store(id, true)
		st := h.store.getOrAdd(id, h.now())
		if st == nil {
			// Every slot holds a watched campaign: this one is shown
			// with its Redis readings and counts of its own.
			st = newLiveStats(h.now())
		}
		ctx, cancel := context.WithCancel(context.Background())
		w = &watch{id: id, stats: st, subs: map[*liveSub]struct{}{}, cancel: cancel, ended: make(chan struct{})}
		h.watches[id] = w
		go h.sample(ctx, w)
	}
	sub := &liveSub{w: w, ch: make(chan []byte, 1)}
	if w.last != nil {
		sub.ch <- w.last
	}
	w.subs[sub] = struct{}{}
	h.subs++
	return sub, nil
}

// unsubscribe closes a live view. The last viewer of a campaign stops its
// sampler and waits for it, so no sampler outlives its viewers.
func (h *liveHub) unsubscribe(sub *liveSub) {
	h.mu.Lock()
	w := sub.w
	if _, ok := w.subs[sub]; ok {
		delete(w.subs, sub)
		h.subs--
	}
	var wait chan struct{}
	if len(w.subs) == 0 && h.watches[w.id] == w {
		delete(h.watches, w.id)
		h.watched.Delete(w.id)
		w.cancel()
		wait = w.ended
	}
	h.mu.Unlock()
	if wait != nil {
		<-wait
	}
}

// sample reads the campaign every interval and publishes each reading,
// until its last viewer leaves or the campaign is gone.
func (h *liveHub) sample(ctx context.Context, w *watch) {
	defer close(w.ended)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	failing := false
	for {
		ev, gone, err := h.reading(ctx, w)
		if ctx.Err() != nil {
			return
		}
		switch {
		case gone:
			h.end(w, ev)
			return
		case err != nil && !failing:
			h.log.Warn("live view: reading the campaign failed; retrying every interval", "campaign", w.id, "err", err)
		case err == nil && failing:
			h.log.Info("live view: reading the campaign works again", "campaign", w.id)
		}
		failing = err != nil
		h.publish(w, ev)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveEvent is the data of a "tick" event: the campaign as GET
// /v1/campaigns/{id} answers it, and the live figures.
type liveEvent struct {
	Campaign statusOut `json:"campaign"`
	Live     liveOut   `json:"live"`
}

// liveOut are the figures aggregated for the console.
type liveOut struct {
	// Seq numbers the readings of this view's sampler.
	Seq        int64  `json:"seq"`
	ReadAt     string `json:"read_at"`
	IntervalMS int64  `json:"interval_ms"`
	// Since is when this process started counting the campaign's answers.
	Since string `json:"since"`
	// Rates are the last minute, one point a reading.
	Rates []ratePoint `json:"rates"`
	// Outcomes count this process's answers to grabs of the campaign.
	Outcomes map[string]int64 `json:"outcomes"`
	// Amounts are the packets this process granted.
	Amounts              amountsOut `json:"amounts"`
	OldestPendingSeconds float64    `json:"oldest_pending_seconds"`
}

// reading reads the campaign once and encodes the event to publish: a
// tick, a "stale" event when Redis could not be read, or "gone" (gone is
// then true) when the campaign no longer exists.
func (h *liveHub) reading(ctx context.Context, w *watch) (ev []byte, gone bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	st, b, err := h.read(rctx, w.id)
	now := h.now()
	switch {
	case errors.Is(err, hongbao.ErrCampaignNotFound), errors.Is(err, settle.ErrNoCampaign):
		return sseEvent("gone", map[string]string{"campaign": w.id, "message": "the campaign no longer exists"}), true, nil
	case err != nil:
		return sseEvent("stale", map[string]string{"campaign": w.id, "message": "reading the campaign failed; retrying"}), false, err
	}
	s := w.stats
	s.mu.Lock()
	s.rates.add(now, s.answers(), st.GrantedCount)
	rates := s.rates.last(now)
	s.mu.Unlock()
	outcomes := make(map[string]int64, numLiveOutcomes)
	for i, name := range liveOutcomeNames {
		if name != "" {
			outcomes[name] = s.outcomes[i].Load()
		}
	}
	w.seq++ // only this goroutine writes it
	return sseEvent("tick", liveEvent{
		Campaign: statusJSON(st, b),
		Live: liveOut{
			Seq: w.seq, ReadAt: rfc3339(now), IntervalMS: h.interval.Milliseconds(), Since: rfc3339(s.since),
			Rates: rates, Outcomes: outcomes, Amounts: s.histogram(), OldestPendingSeconds: b.Oldest.Seconds(),
		},
	}), false, nil
}

// sseEvent encodes one Server-Sent Event. JSON has no raw newlines, so
// the data is one line.
func sseEvent(name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(`{"message":"internal error"}`)
	}
	b := make([]byte, 0, len(data)+len(name)+16)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// publish hands ev to every viewer, replacing an event a viewer has not
// taken yet.
func (h *liveHub) publish(w *watch, ev []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.last = ev
	for sub := range w.subs {
		offer(sub.ch, ev)
	}
}

// offer puts ev in ch (capacity 1) without blocking, replacing what is
// there. Only the sampler sends, so the second send always finds room.
func offer(ch chan []byte, ev []byte) {
	select {
	case ch <- ev:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	select {
	case ch <- ev:
	default:
	}
}

// end sends the last event to every viewer and closes their channels: the
// campaign is gone. A later view of the same id starts a new sampler.
func (h *liveHub) end(w *watch, ev []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range w.subs {
		offer(sub.ch, ev)
		close(sub.ch)
		delete(w.subs, sub)
		h.subs--
	}
	if h.watches[w.id] == w {
		delete(h.watches, w.id)
		h.watched.Delete(w.id)
	}
	w.cancel()
}
