package settle_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/webhook"
)

// wallet is a host's wallet behind a webhook: it verifies signatures,
// dedupes by idempotency key, and fails now and then.
type wallet struct {
	secret []byte
	mu     sync.Mutex
	calls  int
	grants map[string]int64 // idempotency key -> cents
	funded int64
	refund int64
	dups   int
}

func (h *wallet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(h.secret, r, body, time.Minute, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls%3 == 0 { // every third call fails: the sink must retry
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	var ev struct {
		Type       string `json:"type"`
		TotalCents int64  `json:"total_cents"`
		Cents      int64  `json:"cents"`
		Grants     []struct {
			Key   string `json:"idempotency_key"`
			Cents int64  `json:"cents"`
		} `json:"grants"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch ev.Type {
	case "fund":
		h.funded = ev.TotalCents
	case "refund":
		h.refund = ev.Cents
	case "grants":
		for _, g := range ev.Grants {
			if _, dup := h.grants[g.Key]; dup {
				h.dups++
				continue
			}
			h.grants[g.Key] = g.Cents
		}
	}
	w.WriteHeader(http.StatusOK)
}

// TestWebhookSink settles a rain into a host's wallet through the webhook:
// every grant arrives (at least once, deduped by key), then the refund.
func TestWebhookSink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	secret := []byte(strings.Repeat("s", 32))
	h := &wallet{secret: secret, grants: map[string]int64{}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	sink, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)

	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100_000, Count: 500})
	require.NoError(t, err)
	granted, cents := rain(t, e.eng, c.ID, 400)
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)

	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: sink, Consumer: "hook", Logger: quiet(), Only: []string{c.ID}, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	h.mu.Lock()
	defer h.mu.Unlock()
	require.EqualValues(t, 100_000, h.funded)
	require.Len(t, h.grants, int(granted))
	var sum int64
	for _, v := range h.grants {
		sum += v
	}
	require.Equal(t, cents, sum)
	require.Equal(t, 100_000-cents, h.refund)
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	_, err = w.Reconcile(ctx, c.ID)
	require.Error(t, err, "there is no ledger to reconcile against")
}

// refusingWallet accepts every event but a grants batch that holds the
// culprit's grant, which it refuses for good (400), as a host that will
// never pay that user.
type refusingWallet struct {
	secret  []byte
	culprit string
	mu      sync.Mutex
	grants  map[string]int64 // idempotency key -> cents
}

func (h *refusingWallet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(h.secret, r, body, time.Minute, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev struct {
		Grants []struct {
			Key   string `json:"idempotency_key"`
			User  string `json:"user"`
			Cents int64  `json:"cents"`
		} `json:"grants"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range ev.Grants {
		if g.User == h.culprit {
			http.Error(w, "we do not pay this user", http.StatusBadRequest)
			return
		}
	}
	for _, g := range ev.Grants {
		h.grants[g.Key] = g.Cents
	}
	w.WriteHeader(http.StatusOK)
}

// TestWebhookRefusedEntryAlone: a batch the host refuses for good (4xx)
// because of one grant is split, that grant's entry alone goes to the dead
// stream, and the others are delivered; the refusal is not retried forever.
func TestWebhookRefusedEntryAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	secret := []byte(strings.Repeat("s", 32))
	h := &refusingWallet{secret: secret, culprit: "u2", grants: map[string]int64{}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	sink, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)

	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	for u := 0; u < 8; u++ { // one stream entry each
		g, err := e.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(u))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: sink, Consumer: "hook", Logger: quiet(),
		Only: []string{c.ID}, Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err, "the refused entry was retried instead of dead-lettered")

	h.mu.Lock()
	require.Len(t, h.grants, 7, "every grant but the culprit's is delivered")
	h.mu.Unlock()
	require.EqualValues(t, 1, w.Stats().Malformed)
	rc := e.redis.Client
	dead, err := rc.Do(ctx, rc.B().Xrange().Key(redisstore.Default.CampaignKeys(c.ID).Dead).Start("-").End("+").Build()).AsXRange()
	require.NoError(t, err)
	require.Len(t, dead, 1, "the culprit alone is dead-lettered")
	require.Equal(t, "u2", dead[0].FieldValues["user"])
}
