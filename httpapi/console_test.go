package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/settle"
)

// sseEvent is one event of a stream.
type sseEvent struct {
	Name string
	Data []byte
}

// liveTick is the data of a tick, as the console reads it.
type liveTick struct {
	Campaign struct {
		ID             string `json:"id"`
		State          string `json:"state"`
		RemainingCount int64  `json:"remaining_count"`
		GrantedCount   int64  `json:"granted_count"`
		Settlement     struct {
			Lag  int64 `json:"lag_entries"`
			Dead int64 `json:"dead_entries"`
		} `json:"settlement"`
	} `json:"campaign"`
	Live struct {
		Seq      int64            `json:"seq"`
		Outcomes map[string]int64 `json:"outcomes"`
		Rates    []struct {
			T      int64   `json:"t"`
			Grabs  float64 `json:"grabs"`
			Grants float64 `json:"grants"`
		} `json:"rates"`
		Amounts struct {
			Count    int64 `json:"count"`
			SumCents int64 `json:"sum_cents"`
			MinCents int64 `json:"min_cents"`
			MaxCents int64 `json:"max_cents"`
			Bins     []struct {
				From  int64 `json:"from_cents"`
				To    int64 `json:"to_cents"`
				Count int64 `json:"count"`
			} `json:"bins"`
		} `json:"amounts"`
	} `json:"live"`
}

// stream is an open event stream.
type stream struct {
	res    *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

// openEvents opens the live view of campaign id; the stream is closed when
// the test ends.
func (ts *testServer) openEvents(t *testing.T, id, key string) (*stream, reply) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/campaigns/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	// The transport checks the stream's status and Content-Type; its
	// ticks are checked in next.
	res, err := (&http.Client{Transport: openapitest.Transport(t, nil)}).Do(req)
	require.NoError(t, err)
	if res.StatusCode != http.StatusOK {
		defer cancel()
		defer res.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		return nil, reply{Status: res.StatusCode, Header: res.Header, Body: b.Bytes()}
	}
	s := &stream{res: res, events: make(chan sseEvent, 64), cancel: cancel}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Data != nil {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	t.Cleanup(func() { cancel(); res.Body.Close() })
	return s, reply{Status: res.StatusCode, Header: res.Header}
}

// next returns the next event, failing after a deadline.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		require.True(t, ok, "the stream ended")
		if ev.Name == "tick" {
			require.NoError(t, openapitest.CheckSchema("LiveView", ev.Data), "tick %s", ev.Data)
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	return sseEvent{}
}

// tickUntil reads ticks until ok says yes, and returns that tick.
func (s *stream) tickUntil(t *testing.T, ok func(liveTick) bool) liveTick {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		ev := s.next(t)
		if ev.Name != "tick" {
			continue
		}
		var tk liveTick
		require.NoError(t, json.Unmarshal(ev.Data, &tk), "%s", ev.Data)
		if ok(tk) {
			return tk
		}
	}
	t.Fatal("no tick matched before the deadline")
	return liveTick{}
}

func fastLive(c *httpapi.Config) { c.LiveInterval = 20 * time.Millisecond }

// TestLiveView: the event stream's ticks carry the campaign and what this
// process answered: outcome counts, the amounts histogram, the rates.
func TestLiveView(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, fastLive)
	id := ts.create(t, `{"total":"10.00","count":4,"min":"1.00"}`)
	s, r := ts.openEvents(t, id, string(adminKey))
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "text/event-stream", r.Header.Get("Content-Type"))
	first := s.tickUntil(t, func(liveTick) bool { return true })
	require.Equal(t, id, first.Campaign.ID)
	require.EqualValues(t, 4, first.Campaign.RemainingCount)
	require.Zero(t, first.Live.Amounts.Count)

	var cents []int64
	for i := 0; i < 5; i++ {
		g := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, fmt.Sprint("live", i)), "")
		require.Equal(t, http.StatusOK, g.Status)
		if c, ok := g.json(t)["amount_cents"].(float64); ok {
			cents = append(cents, int64(c))
		}
	}
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "live0"), "").Status)
	tk := s.tickUntil(t, func(tk liveTick) bool {
		return tk.Live.Outcomes["sold_out"] == 1 && tk.Live.Outcomes["already_granted"] == 1
	})
	require.Equal(t, map[string]int64{
		"granted": 4, "already_granted": 1, "sold_out": 1, "not_open": 0, "closed": 0, "paused": 0, "blocked": 0,
		"rate_limited": 0, "busy": 0, "error": 0,
	}, tk.Live.Outcomes)
	require.Zero(t, tk.Campaign.RemainingCount)
	require.EqualValues(t, 4, tk.Campaign.GrantedCount)
	require.Equal(t, "closed", tk.Campaign.State)

	a := tk.Live.Amounts
	require.EqualValues(t, 4, a.Count)
	require.EqualValues(t, 1000, a.SumCents, "the four packets are the whole total")
	var inBins int64
	for i, b := range a.Bins {
		require.Less(t, b.From, b.To)
		if i > 0 {
			require.Equal(t, a.Bins[i-1].To, b.From, "bars are contiguous")
		}
		inBins += b.Count
	}
	require.EqualValues(t, 4, inBins)
	require.Equal(t, a.MinCents, a.Bins[0].From)
	require.Equal(t, a.MaxCents+1, a.Bins[len(a.Bins)-1].To)
	require.Len(t, cents, 4)
	for _, c := range cents {
		require.GreaterOrEqual(t, c, a.MinCents)
		require.LessOrEqual(t, c, a.MaxCents)
	}
	// The rates saw six answers and four grants in all.
	var grabs, grants float64
	tk = s.tickUntil(t, func(tk liveTick) bool { return len(tk.Live.Rates) > 3 })
	for _, p := range tk.Live.Rates {
		require.GreaterOrEqual(t, p.Grabs, 0.0)
		grabs, grants = grabs+p.Grabs, grants+p.Grants
	}
	require.Greater(t, grabs, 0.0)
	require.Greater(t, grants, 0.0)
}

// TestLiveViewRefusals: the stream needs an admin key and a campaign that
// exists; the views open at once are capped.
func TestLiveViewRefusals(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { fastLive(c); c.MaxLiveViews = 2 })
	id := ts.create(t, `{"total":"1.00","count":1}`)
	for name, key := range map[string]string{"wrong key": "not-the-admin-key-0123456789abcdefgh", "user token": token(t, "eve")} {
		_, r := ts.openEvents(t, id, key)
		require.Equal(t, http.StatusUnauthorized, r.Status, name)
		require.Equal(t, "unauthorized", r.errorCode(t), name)
	}
	_, r := ts.openEvents(t, "no-such-campaign", string(adminKey))
	require.Equal(t, http.StatusNotFound, r.Status)
	_, r = ts.openEvents(t, "bad%20id", string(adminKey))
	require.Equal(t, http.StatusBadRequest, r.Status)

	a, _ := ts.openEvents(t, id, string(adminKey))
	b, _ := ts.openEvents(t, id, string(adminKey))
	require.NotNil(t, a)
	require.NotNil(t, b)
	_, r = ts.openEvents(t, id, string(adminKey))
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.Equal(t, "busy", r.errorCode(t))
	requireRetryAfter(t, r)
	// Both open views get the same readings.
	ta := a.tickUntil(t, func(tk liveTick) bool { return tk.Live.Seq >= 3 })
	tb := b.tickUntil(t, func(tk liveTick) bool { return tk.Live.Seq >= ta.Live.Seq })
	require.GreaterOrEqual(t, tb.Live.Seq, ta.Live.Seq)
}

// TestLiveViewOutlivesServerTimeouts: the server's read and write
// timeouts, meant for one request and its answer, do not end a stream;
// Stopping does, with "bye".
func TestLiveViewOutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, fastLive)
	id := ts.create(t, `{"total":"1.00","count":1}`)
	hs := httptest.NewUnstartedServer(ts.Server)
	hs.Config.ReadTimeout = 300 * time.Millisecond
	hs.Config.WriteTimeout = 300 * time.Millisecond
	hs.Start()
	t.Cleanup(hs.Close)
	short := &testServer{URL: hs.URL, Server: ts.Server, Client: ts.Client}
	s, r := short.openEvents(t, id, string(adminKey))
	require.Equal(t, http.StatusOK, r.Status)
	start := time.Now()
	s.tickUntil(t, func(liveTick) bool { return time.Since(start) > time.Second })

	ts.Server.Stopping()
	for ev := s.next(t); ev.Name != "bye"; ev = s.next(t) {
	}
	_, ok := <-s.events
	require.False(t, ok, "the stream ends after bye")
	_, r = short.openEvents(t, id, string(adminKey))
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "no new view while stopping")
}

// TestLiveViewGone: a campaign whose keys are gone ends its streams with
// "gone".
func TestLiveViewGone(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, fastLive)
	id := ts.create(t, `{"total":"1.00","count":1}`)
	s, _ := ts.openEvents(t, id, string(adminKey))
	s.tickUntil(t, func(liveTick) bool { return true })
	rc := ts.Redis.Client
	k := redisstore.Default.CampaignKeys(id)
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key(k.Meta, k.Pool, k.Claims, k.Grants, k.Dead).Build()).Error())
	ev := s.next(t)
	for ev.Name == "tick" {
		ev = s.next(t)
	}
	require.Equal(t, "gone", ev.Name, "%s", ev.Data)
	_, ok := <-s.events
	require.False(t, ok)
}

// TestRateLimitedGrabsCounted: grabs refused by a limit count for their
// campaign once it has answers; refusals alone add no campaign.
func TestRateLimitedGrabsCounted(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ts := newTestServer(t, func(c *httpapi.Config) {
		fastLive(c)
		c.UserRate, c.UserBurst = 1, 1
		c.Now = func() time.Time { return now }
	})
	id := ts.create(t, `{"total":"1.00","count":10}`)
	tok := token(t, "hasty")
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "").Status)
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusTooManyRequests, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "").Status)
	}
	s, _ := ts.openEvents(t, id, string(adminKey))
	tk := s.tickUntil(t, func(liveTick) bool { return true })
	require.EqualValues(t, 1, tk.Live.Outcomes["granted"])
	require.EqualValues(t, 3, tk.Live.Outcomes["rate_limited"])
}

// TestListCampaigns: the live campaigns with their status, for admins.
func TestListCampaigns(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	a := ts.create(t, `{"total":"5.00","count":5}`)
	b := ts.create(t, `{"total":"2.00","count":2,"split":"fixed"}`)
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+b+"/grab", token(t, "lister"), "").Status)

	r := ts.do(t, "GET", "/v1/campaigns", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var out struct {
		Campaigns []map[string]any `json:"campaigns"`
		More      bool             `json:"more"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out))
	found := map[string]map[string]any{}
	for _, c := range out.Campaigns {
		found[c["id"].(string)] = c
	}
	require.Contains(t, found, a)
	require.Contains(t, found, b)
	require.EqualValues(t, 5, found[a]["remaining_count"])
	require.EqualValues(t, 1, found[b]["granted_count"])
	require.Equal(t, "1.00", found[b]["remaining"])
	require.Contains(t, found[b], "settlement")
	// The same shape as GET /v1/campaigns/{id}.
	one := ts.do(t, "GET", "/v1/campaigns/"+a, string(adminKey), "").json(t)
	delete(one, "now")
	delete(found[a], "now")
	require.Equal(t, one, found[a])

	for _, key := range []string{"", token(t, "lister"), "wrong-admin-key-0123456789abcdefghij"} {
		r := ts.do(t, "GET", "/v1/campaigns", key, "")
		require.Equal(t, http.StatusUnauthorized, r.Status)
	}
}

// TestRedriveRoute: dead grants go back to the grants stream through the
// API, for the next settlement pass.
func TestRedriveRoute(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.create(t, `{"total":"2.00","count":2}`)
	ctx := context.Background()
	require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "ok-user"), "").Status)
	rc := ts.Redis.Client
	require.NoError(t, rc.Do(ctx, rc.B().Xadd().Key(redisstore.Default.CampaignKeys(id).Grants).Id("*").FieldValue().FieldValue("mallory", "not-a-packet").Build()).Error())
	w, err := settle.New(settle.Config{Redis: rc, Ledger: ts.Ledger, Consumer: "t", Only: []string{id}, Logger: quiet()})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	dead := func() int64 {
		st := ts.do(t, "GET", "/v1/campaigns/"+id, string(adminKey), "").json(t)
		return int64(st["settlement"].(map[string]any)["dead_entries"].(float64))
	}
	require.EqualValues(t, 1, dead())

	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/redrive", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.JSONEq(t, `{"campaign":"`+id+`","redriven_entries":1}`, string(r.Body))
	require.Zero(t, dead())
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/redrive", string(adminKey), "{}")
	require.JSONEq(t, `{"campaign":"`+id+`","redriven_entries":0}`, string(r.Body))

	for _, c := range []struct {
		path, auth, body string
		status           int
	}{
		{"/v1/campaigns/nope/redrive", string(adminKey), "", http.StatusNotFound},
		{"/v1/campaigns/" + id + "/redrive", token(t, "ok-user"), "", http.StatusUnauthorized},
		{"/v1/campaigns/" + id + "/redrive", string(adminKey), `{"x":1}`, http.StatusBadRequest},
	} {
		r := ts.do(t, "POST", c.path, c.auth, c.body)
		require.Equal(t, c.status, r.Status, "%s %s", c.path, r.Body)
		r.errorCode(t)
	}
}

// TestDemoRoutes: the demo's token route exists only in demo mode, and its
// tokens grab as a fresh user each.
func TestDemoRoutes(t *testing.T) {
	t.Parallel()
	plain := newTestServer(t, nil)
	require.Equal(t, http.StatusNotFound, plain.do(t, "POST", "/v1/demo/token", "", "").Status)
	require.Equal(t, http.StatusNotFound, plain.do(t, "GET", "/v1/demo", "", "").Status)

	var current string
	var mu sync.Mutex
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Demo = &httpapi.Demo{Campaign: func() string { mu.Lock(); defer mu.Unlock(); return current }}
	})
	id := ts.create(t, `{"total":"2.00","count":2}`)
	mu.Lock()
	current = id
	mu.Unlock()
	require.JSONEq(t, `{"campaign":"`+id+`"}`, string(ts.do(t, "GET", "/v1/demo", "", "").Body))
	users := map[string]bool{}
	for i := 0; i < 2; i++ {
		r := ts.do(t, "POST", "/v1/demo/token", "", "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var tok struct{ Token, User, Campaign, ExpiresAt string }
		require.NoError(t, json.Unmarshal(r.Body, &tok))
		require.True(t, strings.HasPrefix(tok.User, "demo-"), tok.User)
		require.Equal(t, id, tok.Campaign)
		require.NoError(t, hongbao.ValidateUserID(tok.User))
		users[tok.User] = true
		g := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok.Token, "")
		require.Equal(t, "granted", g.json(t)["outcome"], "%s", g.Body)
		held, err := ts.Engine.Held(context.Background(), id, tok.User)
		require.NoError(t, err)
		require.EqualValues(t, g.json(t)["amount_cents"], held.Cents)
	}
	require.Len(t, users, 2, "each token is a new user")
	require.Equal(t, http.StatusBadRequest, ts.do(t, "POST", "/v1/demo/token", "", `{"user":"alice"}`).Status)

	// Tokens are handed out at a limited rate per address (burst 5, one
	// every 10s): a script cannot mint a crowd of players.
	for range 3 {
		require.Equal(t, http.StatusOK, ts.do(t, "POST", "/v1/demo/token", "", "").Status)
	}
	r := ts.do(t, "POST", "/v1/demo/token", "", "")
	require.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
	require.Equal(t, "rate_limited", r.errorCode(t))
}

// TestAdminKeyNeverLogged: whatever the console does, right or wrong, the
// key it presents never reaches the log, even at debug level.
func TestAdminKeyNeverLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	ts := newTestServer(t, func(c *httpapi.Config) {
		fastLive(c)
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	wrong := "wrong-admin-key-0123456789abcdefghij"
	admin := string(adminKey)
	id := ts.create(t, `{"total":"1.00","count":1}`)
	for _, key := range []string{admin, wrong} {
		ts.do(t, "GET", "/v1/campaigns", key, "")
		ts.do(t, "GET", "/v1/campaigns/"+id, key, "")
		ts.do(t, "POST", "/v1/campaigns", key, `{"total":"x","count":1}`)
		ts.do(t, "POST", "/v1/campaigns/"+id+"/redrive", key, "")
		ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", key, "")
		if s, _ := ts.openEvents(t, id, key); s != nil {
			s.tickUntil(t, func(liveTick) bool { return true })
		}
	}
	ts.do(t, "POST", "/v1/campaigns/"+id+"/close", admin, "")
	require.Contains(t, buf.String(), "admin action", "the log was written")
	require.NotContains(t, buf.String(), admin)
	require.NotContains(t, buf.String(), wrong)
}

// syncBuffer is a bytes.Buffer for a logger written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
