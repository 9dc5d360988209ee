package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
)

var gatewayKey = []byte("gateway-key-0123456789abcdefghijklm")

// batchResult is one result of POST /v1/campaigns/{id}/grabs.
type batchResult struct {
	UserID      string `json:"user_id"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error"`
	PacketID    string `json:"packet_id"`
	Amount      string `json:"amount"`
	AmountCents int64  `json:"amount_cents"`
}

func usersBody(users []string) string {
	b, _ := json.Marshal(map[string][]string{"users": users})
	return string(b)
}

// newGatewayServer is a test server with a gateway key, without the
// per-user limit unless limited.
func newGatewayServer(t testing.TB, limited bool) *testServer {
	return newTestServer(t, func(c *httpapi.Config) {
		c.GatewayKeys = [][]byte{gatewayKey}
		if !limited {
			c.UserRate = -1
		}
	})
}

// grabs sends a batch and decodes its 200 answer.
func (ts *testServer) grabs(t testing.TB, id string, users []string) []batchResult {
	t.Helper()
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(users))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeResults(t, r.Body)
}

func decodeResults(t testing.TB, body []byte) []batchResult {
	t.Helper()
	var out struct {
		Results []batchResult `json:"results"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), "%s", body)
	return out.Results
}

// TestGrabBatchOutcomes: one result per user named, in order; the first
// mentions share the packets, a repeat answers already_granted with the
// same packet (or the first mention's outcome when it got none), and the
// amounts add up to the campaign's total once it sold out.
func TestGrabBatchOutcomes(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	id := ts.create(t, `{"total":"10.00","count":3,"min":"0.01"}`)
	users := []string{"u-1", "u-2", "u-3", "u-4", "u-2", "u-5", "u-4", "u-2"}
	res := ts.grabs(t, id, users)
	require.Len(t, res, len(users))
	first := map[string]batchResult{}
	var granted int
	var cents int64
	for i, r := range res {
		require.Equal(t, users[i], r.UserID, "result %d", i)
		require.Empty(t, r.Error)
		f, seen := first[r.UserID]
		switch {
		case !seen:
			first[r.UserID] = r
			require.Contains(t, []string{"granted", "sold_out"}, r.Outcome, "result %d", i)
			if r.Outcome == "granted" {
				granted++
				cents += r.AmountCents
				require.True(t, strings.HasPrefix(r.PacketID, id+"/"), r.PacketID)
				require.Equal(t, hongbao.FormatCents(r.AmountCents), r.Amount)
			}
		case f.Outcome == "granted":
			require.Equal(t, "already_granted", r.Outcome, "result %d", i)
			require.Equal(t, f.PacketID, r.PacketID)
			require.Equal(t, f.AmountCents, r.AmountCents)
		default:
			require.Equal(t, f.Outcome, r.Outcome, "result %d", i)
			require.Empty(t, r.PacketID)
		}
	}
	require.Equal(t, 3, granted)
	require.EqualValues(t, 1000, cents)

	// The single grab agrees: the user holds the packet the batch told.
	for u, f := range first {
		if f.Outcome != "granted" {
			continue
		}
		g, err := ts.Engine.Held(context.Background(), id, u)
		require.NoError(t, err)
		require.Equal(t, f.PacketID, g.PacketID())
		require.Equal(t, f.AmountCents, g.Cents)
	}
}

// TestGrabBatchOtherOutcomes: a paused campaign answers every user
// paused, a blocked user blocked, a closed campaign closed, a campaign not
// yet open not_open: the single grab's words.
func TestGrabBatchOtherOutcomes(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	id := ts.create(t, `{"total":"10.00","count":10}`)
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/blocked", string(adminKey), `{"users":["bad-1"]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res := ts.grabs(t, id, []string{"ok-1", "bad-1"})
	require.Equal(t, "granted", res[0].Outcome)
	require.Equal(t, "blocked", res[1].Outcome)

	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/pause", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res = ts.grabs(t, id, []string{"ok-1", "ok-2"})
	require.Equal(t, "already_granted", res[0].Outcome, "a holder keeps the packet")
	require.Equal(t, "paused", res[1].Outcome)

	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/close", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res = ts.grabs(t, id, []string{"ok-3"})
	require.Equal(t, "closed", res[0].Outcome)

	later := ts.create(t, `{"total":"10.00","count":10,"opens_at":"2099-01-01T00:00:00Z","closes_at":"2099-01-02T00:00:00Z"}`)
	res = ts.grabs(t, later, []string{"ok-1"})
	require.Equal(t, "not_open", res[0].Outcome)
}

// TestGrabBatchRefused: a bad id, too many users, no users, a bad body,
// an unknown campaign: the whole request is refused and nothing granted.
func TestGrabBatchRefused(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	id := ts.create(t, `{"total":"10.00","count":10}`)
	many := make([]string, httpapi.MaxGrabBatch+1)
	for i := range many {
		many[i] = fmt.Sprintf("u-%d", i)
	}
	for _, tc := range []struct {
		name, body, code string
		status           int
	}{
		{"bad id", usersBody([]string{"u-1", "u 2", "u-3"}), "invalid_request", 400},
		{"long id", usersBody([]string{"u-1", strings.Repeat("x", 65)}), "invalid_request", 400},
		{"empty id", usersBody([]string{"u-1", ""}), "invalid_request", 400},
		{"too many", usersBody(many), "invalid_request", 400},
		{"none", `{"users":[]}`, "invalid_request", 400},
		{"null", `{"users":null}`, "invalid_request", 400},
		{"no body", "", "invalid_json", 400},
		{"unknown field", `{"users":["u-1"],"amount":1}`, "invalid_request", 400},
		{"not json", `{"users":["u-1"`, "invalid_json", 400},
	} {
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), tc.body)
		require.Equal(t, tc.status, r.Status, "%s: %s", tc.name, r.Body)
		code := r.errorCode(t)
		require.NotEmpty(t, code, tc.name)
	}
	st, err := ts.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.Zero(t, st.GrantedCount, "a refused batch grants nothing")

	// Exactly the maximum is served.
	res := ts.grabs(t, id, many[:httpapi.MaxGrabBatch])
	require.Len(t, res, httpapi.MaxGrabBatch)

	r := ts.do(t, "POST", "/v1/campaigns/nope/grabs", string(gatewayKey), usersBody([]string{"u-1"}))
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	require.Equal(t, "not_found", r.errorCode(t))
	r = ts.do(t, "POST", "/v1/campaigns/bad%20id/grabs", string(gatewayKey), usersBody([]string{"u-1"}))
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
}

// TestGrabBatchCredentials: a gateway key and an admin key are served; a
// user token is forbidden; a payment key, no key or a wrong one is
// unauthorized.
func TestGrabBatchCredentials(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	id := ts.create(t, `{"total":"10.00","count":10}`)
	path, body := "/v1/campaigns/"+id+"/grabs", usersBody([]string{"u-1"})
	for _, tc := range []struct {
		name, auth string
		status     int
		code       string
	}{
		{"gateway key", string(gatewayKey), 200, ""},
		{"admin key", string(adminKey), 200, ""},
		{"user token", token(t, "u-1"), 403, "forbidden"},
		{"payment key", string(paymentKey), 401, "unauthorized"},
		{"none", "", 401, "unauthorized"},
		{"wrong", strings.Repeat("g", 40), 401, "unauthorized"},
	} {
		r := ts.do(t, "POST", path, tc.auth, body)
		require.Equal(t, tc.status, r.Status, "%s: %s", tc.name, r.Body)
		if tc.code != "" {
			require.Equal(t, tc.code, r.errorCode(t), tc.name)
		}
	}
	// And the gateway key opens nothing else.
	r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", string(gatewayKey), "")
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	r = ts.do(t, "GET", "/v1/campaigns/"+id, string(gatewayKey), "")
	require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
}

// TestGrabBatchUserLimit: every user of a batch spends the per-user
// limit; one past it is answered rate_limited and not grabbed, the others
// are served.
func TestGrabBatchUserLimit(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.GatewayKeys = [][]byte{gatewayKey}
		c.UserRate, c.UserBurst = 0.001, 2
	})
	id := ts.create(t, `{"total":"10.00","count":10}`)
	res := ts.grabs(t, id, []string{"hot", "cold", "hot", "hot"})
	require.Equal(t, "granted", res[0].Outcome)
	require.Equal(t, "granted", res[1].Outcome)
	require.Equal(t, "already_granted", res[2].Outcome)
	require.Equal(t, res[0].PacketID, res[2].PacketID)
	require.Equal(t, "rate_limited", res[3].Error)
	require.Empty(t, res[3].Outcome)
}

// TestGrabBatchRetry: a batch sent again answers each user
// already_granted with the packet of the first.
func TestGrabBatchRetry(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	id := ts.create(t, `{"total":"100.00","count":50}`)
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("r-%d", i)
	}
	a := ts.grabs(t, id, users)
	b := ts.grabs(t, id, users)
	for i := range users {
		require.Equal(t, "granted", a[i].Outcome)
		require.Equal(t, "already_granted", b[i].Outcome)
		require.Equal(t, a[i].PacketID, b[i].PacketID)
		require.Equal(t, a[i].AmountCents, b[i].AmountCents)
	}
}

// TestGrabBatchConcurrent: many batches of overlapping users at once,
// more users than packets: no user gets two packets, no packet goes to
// two users, every packet is granted and the amounts add up to the total.
func TestGrabBatchConcurrent(t *testing.T) {
	t.Parallel()
	grabBatchConcurrent(t, "")
}

// TestGrabBatchConcurrentSharded: the same over four shards, each user
// grabbed on its home shard.
func TestGrabBatchConcurrentSharded(t *testing.T) {
	t.Parallel()
	grabBatchConcurrent(t, `,"shards":4`)
}

func grabBatchConcurrent(t *testing.T, extra string) {
	ts := newGatewayServer(t, false)
	const count, nUsers, batches, size = 300, 600, 48, 100
	id := ts.create(t, fmt.Sprintf(`{"total":"600.00","count":%d,"min":"0.01"%s}`, count, extra))
	var mu sync.Mutex
	told := map[string]string{} // user -> packet
	owner := map[string]string{}
	amounts := map[string]int64{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for b := 0; b < batches; b++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rng := rand.New(rand.NewPCG(uint64(b), 1))
			users := make([]string, size)
			for i := range users {
				users[i] = fmt.Sprintf("c-%d", rng.IntN(nUsers))
			}
			r, err := ts.try("POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(users))
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("batch %d: %v %d %s", b, err, r.Status, r.Body)
				return
			}
			var out struct{ Results []batchResult }
			if err := json.Unmarshal(r.Body, &out); err != nil || len(out.Results) != size {
				t.Errorf("batch %d: %v %s", b, err, r.Body)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, x := range out.Results {
				if x.UserID != users[i] {
					t.Errorf("batch %d result %d is %s's, not %s's", b, i, x.UserID, users[i])
				}
				if x.PacketID == "" {
					continue
				}
				if p, ok := told[x.UserID]; ok && p != x.PacketID {
					t.Errorf("user %s told %s and %s", x.UserID, p, x.PacketID)
				}
				if u, ok := owner[x.PacketID]; ok && u != x.UserID {
					t.Errorf("packet %s told to %s and %s", x.PacketID, u, x.UserID)
				}
				told[x.UserID], owner[x.PacketID], amounts[x.PacketID] = x.PacketID, x.UserID, x.AmountCents
			}
		}()
	}
	wg.Wait()
	require.Len(t, owner, count, "every packet granted once")
	var sum int64
	for _, c := range amounts {
		sum += c
	}
	require.EqualValues(t, 60000, sum)
	st, err := ts.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	require.EqualValues(t, count, st.GrantedCount)
}

// lossyTransport loses the replies of half the batches after the server
// answered them: the caller sees an error, as when a connection drops.
type lossyTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	rng  *rand.Rand
}

var errLost = errors.New("reply lost")

func (l *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	lose := strings.HasSuffix(req.URL.Path, "/grabs") && l.rng.IntN(2) == 0
	l.mu.Unlock()
	if lose {
		res.Body.Close()
		return nil, errLost
	}
	return res, nil
}

// TestGrabBatchLostReplies is a history test: gateways send batches of
// overlapping users, half the replies are lost after the server answered,
// and each lost batch is retried until one answer arrives. Every user an
// answer told granted or already_granted holds exactly that packet (the
// engine's Held), no packet was told to two users, and the packets told
// are every packet granted, adding up to the total.
func TestGrabBatchLostReplies(t *testing.T) {
	t.Parallel()
	ts := newGatewayServer(t, false)
	ts.Client.Transport = &lossyTransport{next: ts.Client.Transport, rng: rand.New(rand.NewPCG(7, 7))}
	const count, nUsers, batches, size = 120, 200, 24, 50
	id := ts.create(t, fmt.Sprintf(`{"total":"240.00","count":%d,"min":"0.01"}`, count))
	var mu sync.Mutex
	told := map[string]batchResult{}
	var wg sync.WaitGroup
	for b := 0; b < batches; b++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(b), 2))
			users := make([]string, size)
			for i := range users {
				users[i] = fmt.Sprintf("l-%d", rng.IntN(nUsers))
			}
			var r reply
			for attempt := 0; ; attempt++ {
				var err error
				r, err = ts.try("POST", "/v1/campaigns/"+id+"/grabs", string(gatewayKey), usersBody(users))
				if err == nil {
					break
				}
				if !errors.Is(err, errLost) || attempt > 50 {
					t.Errorf("batch %d: %v", b, err)
					return
				}
			}
			var out struct{ Results []batchResult }
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &out) != nil {
				t.Errorf("batch %d: %d %s", b, r.Status, r.Body)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, x := range out.Results {
				if x.PacketID == "" {
					continue
				}
				if p, ok := told[x.UserID]; ok && p.PacketID != x.PacketID {
					t.Errorf("user %s told %s and %s", x.UserID, p.PacketID, x.PacketID)
				}
				told[x.UserID] = x
			}
		}()
	}
	wg.Wait()
	owners := map[string]string{}
	var sum int64
	for u, x := range told {
		g, err := ts.Engine.Held(context.Background(), id, u)
		require.NoError(t, err, u)
		require.Equal(t, x.PacketID, g.PacketID(), u)
		require.Equal(t, x.AmountCents, g.Cents, u)
		require.NotContains(t, owners, x.PacketID)
		owners[x.PacketID] = u
		sum += x.AmountCents
	}
	st, err := ts.Engine.Status(context.Background(), id)
	require.NoError(t, err)
	if st.GrantedCount == count {
		require.EqualValues(t, 24000, sum, "the packets told add up to the total")
	}
	require.EqualValues(t, st.GrantedCount, len(told), "every packet granted was told to its user")
}

// TestGrabBatchCounted: the console's live counts and the grab metrics
// count every user of a batch, as they count single grabs; a user past
// the per-user limit is counted rate_limited.
func TestGrabBatchCounted(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) {
		fastLive(c)
		c.GatewayKeys = [][]byte{gatewayKey}
		c.UserRate, c.UserBurst = 0.001, 2
	})
	id := ts.create(t, `{"total":"10.00","count":4,"min":"1.00"}`)
	s, r := ts.openEvents(t, id, string(adminKey))
	require.Equal(t, http.StatusOK, r.Status)
	s.tickUntil(t, func(liveTick) bool { return true })
	res := ts.grabs(t, id, []string{"a", "b", "c", "d", "e", "a", "a"})
	require.Equal(t, "rate_limited", res[6].Error)
	// The first mentions race for 4 packets: one of the five users is
	// sold_out; if that is "a", its second mention is sold_out too, else
	// already_granted. The counts must be the batch's answers, whichever.
	want := map[string]int64{"rate_limited": 1}
	for _, x := range res[:6] {
		want[x.Outcome]++
	}
	require.EqualValues(t, 4, want["granted"], "%+v", res)
	require.EqualValues(t, 2, want["sold_out"]+want["already_granted"], "%+v", res)
	// The batch's rounds may land in different ticks: wait for a tick that
	// has counted all of them (none that counts more can come: the test
	// fails by waiting in vain, and by the checks below).
	tk := s.tickUntil(t, func(tk liveTick) bool {
		return tk.Live.Outcomes["granted"] == 4 &&
			tk.Live.Outcomes["sold_out"]+tk.Live.Outcomes["already_granted"]+tk.Live.Outcomes["rate_limited"] == 3
	})
	for _, o := range []string{"sold_out", "already_granted", "rate_limited"} {
		require.EqualValues(t, want[o], tk.Live.Outcomes[o], o)
	}
	require.EqualValues(t, 1000, tk.Live.Amounts.SumCents)

	m := ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, m.Status)
	require.Contains(t, string(m.Body), `hongbao_grabs_total{outcome="granted"} 4`)
	for _, o := range []string{"sold_out", "already_granted"} {
		if want[o] > 0 {
			require.Contains(t, string(m.Body), fmt.Sprintf("hongbao_grabs_total{outcome=%q} %d", o, want[o]))
		}
	}
}
