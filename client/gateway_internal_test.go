package client

// The client module's own tests use the standard library and the
// module's own requirements only (its module graph stays what its code
// needs). The tests against a real
// service are in the root module's internal/clienttest; these cover what
// needs no service: the reply mapping of a batch and the queue's bounds.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGrabs answers the batch route as the service's contract says,
// granting every user a packet named after it, and records the batches.
type fakeGrabs struct {
	mu      sync.Mutex
	batches [][]string
	reply   func(users []string) string // nil: every user granted
}

func (f *fakeGrabs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct{ Users []string }
	if err := json.Unmarshal(b, &req); err != nil || !strings.HasSuffix(r.URL.Path, "/grabs") {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.batches = append(f.batches, req.Users)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.reply != nil {
		_, _ = io.WriteString(w, f.reply(req.Users))
		return
	}
	var out strings.Builder
	out.WriteString(`{"results":[`)
	for i, u := range req.Users {
		if i > 0 {
			out.WriteString(",")
		}
		out.WriteString(`{"user_id":"` + u + `","outcome":"granted","packet_id":"c/` + u + `","amount":"0.01","amount_cents":1}`)
	}
	out.WriteString("]}")
	_, _ = io.WriteString(w, out.String())
}

func newFakeGateway(t *testing.T, f *fakeGrabs, o GatewayOptions) *Gateway {
	t.Helper()
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL, Options{Token: "gw", Retry: Retry{MaxAttempts: 2, MinBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := c.Gateway(o)
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// TestGatewayAnswersEachCaller: every caller hears its own user's
// packet, batches never exceed MaxBatch, and every call is in one batch.
func TestGatewayAnswersEachCaller(t *testing.T) {
	t.Parallel()
	f := &fakeGrabs{}
	gw := newFakeGateway(t, f, GatewayOptions{MaxBatch: 7, InFlight: 2})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				u := "u" + string(rune('a'+g)) + string(rune('a'+i))
				r, err := gw.Grab(context.Background(), "c", u)
				if err != nil || r.PacketID != "c/"+u || r.Outcome != Granted {
					t.Errorf("user %s: %+v %v", u, r, err)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, b := range f.batches {
		if len(b) > 7 {
			t.Errorf("a batch of %d users, MaxBatch 7", len(b))
		}
		n += len(b)
	}
	if n != 160 {
		t.Errorf("%d users sent, want 160", n)
	}
	if gw.Queued("c") != 0 || len(gw.lanes) != 0 {
		t.Errorf("lanes left behind: %d", len(gw.lanes))
	}
}

// TestGatewayRefusesAWrongReply: a reply that does not answer the users
// sent, in their order, is every caller's error, not a wrong packet.
func TestGatewayRefusesAWrongReply(t *testing.T) {
	t.Parallel()
	for name, reply := range map[string]func([]string) string{
		"short":   func([]string) string { return `{"results":[]}` },
		"another": func([]string) string { return `{"results":[{"user_id":"zed","outcome":"granted"}]}` },
	} {
		f := &fakeGrabs{reply: reply}
		gw := newFakeGateway(t, f, GatewayOptions{})
		g, err := gw.Grab(context.Background(), "c", "ann")
		if err == nil || g != nil {
			t.Errorf("%s: %+v %v, want an error", name, g, err)
		}
	}
}

func TestGatewayPerUserError(t *testing.T) {
	t.Parallel()
	f := &fakeGrabs{reply: func([]string) string { return `{"results":[{"user_id":"ann","error":"rate_limited"}]}` }}
	gw := newFakeGateway(t, f, GatewayOptions{})
	_, err := gw.Grab(context.Background(), "c", "ann")
	var e *Error
	if !errors.Is(err, ErrRateLimited) || !errors.As(err, &e) || e.Status != http.StatusTooManyRequests {
		t.Errorf("%v, want rate_limited (429)", err)
	}
}
