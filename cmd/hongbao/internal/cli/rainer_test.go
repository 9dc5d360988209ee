package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// longFaults says whether the long versions of the fault tests run
// (HONGBAO_LONG_FAULTS=1, or make faults); the normal suite runs short
// ones.
func longFaults() bool { return os.Getenv("HONGBAO_LONG_FAULTS") == "1" }

// told is what a user was told about a packet.
type told struct {
	packet string // "<campaign>/<seq>"
	cents  int64
}

// rainer grabs over HTTP the way a client should: an answer of 503 (busy,
// outcome unknown, unavailable) or 429 is retried for the same user after
// a pause; any other answer is final. It records every packet a user was
// told of (GRANTED or ALREADY) and fails the test when a user is told of
// two, or gets an answer outside 200, 429 and 503.
type rainer struct {
	t       *testing.T
	api     *apiClient
	url     func() string
	id      string
	patient time.Duration // how long one user keeps retrying

	mu       sync.Mutex
	acked    map[string]told
	grantees map[string]bool // users answered GRANTED
	granted  atomic.Int64
	soldOut  atomic.Int64
	retries  atomic.Int64
	statuses sync.Map // status -> *atomic.Int64
}

func newRainer(t *testing.T, api *apiClient, url func() string, id string) *rainer {
	return &rainer{t: t, api: api, url: url, id: id, patient: 60 * time.Second, acked: map[string]told{}, grantees: map[string]bool{}}
}

func (r *rainer) count(status int) {
	v, _ := r.statuses.LoadOrStore(status, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// statusCounts returns the answers by HTTP status.
func (r *rainer) statusCounts() map[int]int64 {
	out := map[int]int64{}
	r.statuses.Range(func(k, v any) bool { out[k.(int)] = v.(*atomic.Int64).Load(); return true })
	return out
}

// grab grabs for user until a final answer; it reports on r.t with
// Errorf, so it may run on any goroutine.
func (r *rainer) grab(user string) {
	tok := r.api.userToken(r.t, user)
	deadline := time.Now().Add(r.patient)
	for attempt := 0; ; attempt++ {
		code, m, err := r.api.call("POST", r.url()+"/v1/campaigns/"+r.id+"/grab", tok, "")
		if err == nil {
			r.count(code)
		}
		switch {
		case err == nil && code == http.StatusOK:
			r.final(user, m)
			return
		case err == nil && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests:
			r.t.Errorf("grab for %s answered %d %v", user, code, m)
			return
		case time.Now().After(deadline):
			r.t.Errorf("grab for %s: no final answer within %s (last: %d %v %v)", user, r.patient, code, m, err)
			return
		}
		r.retries.Add(1)
		time.Sleep(time.Duration(min(5*(attempt+1), 100)) * time.Millisecond)
	}
}

// final records a 200 answer.
func (r *rainer) final(user string, m map[string]any) {
	switch m["outcome"] {
	case "granted", "already_granted":
		got := told{packet: fmt.Sprint(m["packet_id"]), cents: int64(m["amount_cents"].(float64))}
		granted := m["outcome"] == "granted"
		r.mu.Lock()
		before, had := r.acked[user]
		if !had {
			r.acked[user] = got
		}
		twice := granted && r.grantees[user]
		if granted {
			r.grantees[user] = true
		}
		r.mu.Unlock()
		// A double click's ALREADY may reach the client before its GRANTED.
		if had && before != got {
			r.t.Errorf("%s was told of packet %v, then of %v", user, before, got)
		}
		if twice {
			r.t.Errorf("%s was answered GRANTED twice (packet %v)", user, got)
		}
		if granted && !twice {
			r.granted.Add(1)
		}
	case "sold_out", "closed":
		r.soldOut.Add(1)
	default:
		r.t.Errorf("grab for %s answered %v", user, m)
	}
}

// rain has workers goroutines grab for users prefix<from>..prefix<to-1>,
// each user clicks times at once. after, if not nil, runs (on a worker)
// once n users have a final answer.
func (r *rainer) rain(prefix string, from, to, workers, clicks int, at int64, after func()) {
	users := make(chan int)
	var done atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				user := prefix + strconv.Itoa(u)
				var cw sync.WaitGroup
				for range clicks {
					cw.Add(1)
					go func() { defer cw.Done(); r.grab(user) }()
				}
				cw.Wait()
				if done.Add(1) == at && after != nil {
					once.Do(after)
				}
			}
		}()
	}
	for u := from; u < to; u++ {
		users <- u
	}
	close(users)
	wg.Wait()
}

// requireReadBack checks every acknowledged grant against the claims in
// Redis (read directly on c, the current primary): each is there, with
// the packet the user was told of.
func (r *rainer) requireReadBack(t *testing.T, c rueidis.Client, shards int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx := context.Background()
	for user, g := range r.acked {
		k := redisstore.Default.ShardKeys(r.id, shards, hongbao.HomeShard(user, shards))
		v, err := c.Do(ctx, c.B().Hget().Key(k.Claims).Field(user).Build()).ToString()
		require.NoError(t, err, "the acknowledged grant of %s is gone", user)
		seq := strings.TrimPrefix(g.packet, r.id+"/")
		require.Equal(t, seq+":"+strconv.FormatInt(g.cents, 10), v, "the claim of %s", user)
	}
}

// closeAfterFaults closes a campaign right after faults between serve and
// Redis: a close sent on a connection the faults broke answers 503 (its
// outcome unknown to serve), and a close is idempotent, so an operator, and
// this, sends it again until it answers 200.
func closeAfterFaults(t *testing.T, api *apiClient, url, id string) {
	t.Helper()
	waitFor(t, "the close to be answered 200", 15*time.Second, func() bool {
		code, _, err := api.call("POST", url+"/v1/campaigns/"+id+"/close", api.admin, "")
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code)
		return code == http.StatusOK
	})
}

// waitSettled waits until the campaign reads settled through the API.
func waitSettled(t *testing.T, api *apiClient, url func() string, id string, within time.Duration) {
	t.Helper()
	waitFor(t, "the campaign to settle", within, func() bool {
		_, m, err := api.call("GET", url()+"/v1/campaigns/"+id, api.admin, "")
		return err == nil && m["state"] == "settled"
	})
}
