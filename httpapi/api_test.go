package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

type grabOut struct {
	Campaign    string `json:"campaign"`
	Outcome     string `json:"outcome"`
	PacketID    string `json:"packet_id"`
	Amount      string `json:"amount"`
	AmountCents int64  `json:"amount_cents"`
}

// TestRainOverHTTP: 2,000 users with valid tokens each send 3 concurrent
// grabs at 500 packets over real HTTP on real Redis.
func TestRainOverHTTP(t *testing.T) {
	t.Parallel()
	rainOverHTTP(t, `{"total":"1000.00","count":500,"min":"0.50","max_cents":1000}`, 2000, 3)
}

// TestShardedRainOverHTTP: the same over four shards, with fewer users
// than the packets' homes need on some shards: every packet is granted.
func TestShardedRainOverHTTP(t *testing.T) {
	t.Parallel()
	rainOverHTTP(t, `{"total":"1000.00","count":500,"min":"0.50","max_cents":1000,"shards":4}`, 1000, 2)
}

func rainOverHTTP(t *testing.T, spec string, users, clicks int) {
	ts := newTestServer(t, nil)
	id := ts.create(t, spec)

	type answer struct {
		user string
		out  grabOut
	}
	answers := make(chan answer, users*clicks)
	sem := make(chan struct{}, 64) // users in flight at once; each sends its 3 grabs together
	var wg sync.WaitGroup
	for u := 0; u < users; u++ {
		user := fmt.Sprintf("user-%d", u)
		tok := token(t, user)
		sem <- struct{}{}
		var uw sync.WaitGroup
		for c := 0; c < clicks; c++ {
			wg.Add(1)
			uw.Add(1)
			go func() {
				defer wg.Done()
				defer uw.Done()
				r, err := ts.try("POST", "/v1/campaigns/"+id+"/grab", tok, "")
				if err != nil {
					t.Errorf("grab: %v", err)
					return
				}
				if r.Status != http.StatusOK {
					t.Errorf("grab: %d %s", r.Status, r.Body)
					return
				}
				var g grabOut
				if err := json.Unmarshal(r.Body, &g); err != nil {
					t.Errorf("grab reply %s: %v", r.Body, err)
					return
				}
				answers <- answer{user, g}
			}()
		}
		go func() { uw.Wait(); <-sem }()
	}
	wg.Wait()
	close(answers)
	require.False(t, t.Failed())

	byUser := map[string]grabOut{}
	byPacket := map[string]string{}
	granted := 0
	var sum int64
	for a := range answers {
		switch a.out.Outcome {
		case "granted":
			granted++
			require.NotContains(t, byPacket, a.out.PacketID, "packet granted twice")
			byPacket[a.out.PacketID] = a.user
			sum += a.out.AmountCents
			require.Equal(t, fmt.Sprintf("%d.%02d", a.out.AmountCents/100, a.out.AmountCents%100), a.out.Amount)
			require.GreaterOrEqual(t, a.out.AmountCents, int64(50))
			require.LessOrEqual(t, a.out.AmountCents, int64(1000))
		case "already_granted", "sold_out":
		default:
			t.Fatalf("unexpected outcome %+v", a.out)
		}
		if a.out.Outcome != "sold_out" {
			if prev, ok := byUser[a.user]; ok {
				require.Equal(t, prev.PacketID, a.out.PacketID, "user %s got two packets", a.user)
			}
			byUser[a.user] = a.out
		}
	}
	require.Equal(t, 500, granted)
	require.Len(t, byUser, 500)
	require.EqualValues(t, 100000, sum)

	// Every later grab answers already_granted with the same packet, and
	// grants/me agrees; losers hold nothing.
	for user, g := range byUser {
		tok := token(t, user)
		r := ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", tok, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var again grabOut
		require.NoError(t, json.Unmarshal(r.Body, &again))
		require.Equal(t, "already_granted", again.Outcome)
		require.Equal(t, g.PacketID, again.PacketID)
		require.Equal(t, g.AmountCents, again.AmountCents)
		r = ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", tok, "")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var mine grabOut
		require.NoError(t, json.Unmarshal(r.Body, &mine))
		require.Equal(t, g.PacketID, mine.PacketID)
		require.Equal(t, g.Amount, mine.Amount)
	}
	for u := 0; u < users; u++ {
		user := fmt.Sprintf("user-%d", u)
		if _, ok := byUser[user]; ok {
			continue
		}
		r := ts.do(t, "GET", "/v1/campaigns/"+id+"/grants/me", token(t, user), "")
		require.Equal(t, http.StatusNotFound, r.Status)
		require.Equal(t, "no_grant", r.errorCode(t))
		break
	}

	// Status, close, settle, reconcile.
	r := ts.do(t, "GET", "/v1/campaigns/"+id, string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	st := r.json(t)
	require.EqualValues(t, 500, st["granted_count"])
	require.EqualValues(t, 100000, st["granted_cents"])
	require.EqualValues(t, 0, st["remaining_cents"])
	require.Equal(t, "1000.00", st["granted"])

	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/close", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "closed", r.json(t)["state"])

	w, err := settle.New(settle.Config{Redis: ts.Redis.Client, Ledger: ts.Ledger, Consumer: "t", Logger: quiet(),
		Only: []string{id}, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	rep, err := settle.Reconcile(ctx, ts.Redis.Client, "", ts.Ledger, id)
	require.NoError(t, err)
	require.True(t, rep.OK, "differences: %v", rep.Differences)
	require.EqualValues(t, 500, rep.GrantedLedger)
	require.EqualValues(t, 100000, rep.GrantedCentsLedger)
}

func TestCreateAndStatus(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r := ts.do(t, "POST", "/v1/campaigns", string(adminKey),
		fmt.Sprintf(`{"total_cents":1000,"count":10,"split":"fixed","opens_at":%q,"closes_at":%q,"funding_account":"acme","seed":42}`,
			opens.Format(time.RFC3339), opens.Add(time.Hour).Format(time.RFC3339)))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	c := r.json(t)
	require.Equal(t, "scheduled", c["state"])
	require.Equal(t, "10.00", c["total"])
	require.EqualValues(t, 1000, c["total_cents"])
	require.Equal(t, "acme", c["funding_account"])
	require.Equal(t, "42", c["seed"])
	require.Equal(t, "fixed", c["split"])
	require.Equal(t, opens.Format(time.RFC3339Nano), c["opens_at"])
	id := c["id"].(string)

	// Not open yet.
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "early"), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "not_open", r.json(t)["outcome"])
	_, hasPacket := r.json(t)["packet_id"]
	require.False(t, hasPacket)

	// Closing before it opens cancels it.
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/close", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "cancelled", r.json(t)["close_reason"])
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "late"), "")
	require.Equal(t, "closed", r.json(t)["outcome"])
	r = ts.do(t, "GET", "/v1/campaigns/"+id, string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status)
	st := r.json(t)
	require.Equal(t, "closed", st["state"])
	require.Contains(t, st, "settlement")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	key := "create-" + fmt.Sprint(time.Now().UnixNano())
	body := `{"total":"5.00","count":5}`
	r1 := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r1.Status, "%s", r1.Body)
	r2 := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusOK, r2.Status, "%s", r2.Body)
	require.Equal(t, r1.json(t)["id"], r2.json(t)["id"])
	require.Equal(t, r1.json(t)["seed"], r2.json(t)["seed"])
	r3 := ts.do(t, "POST", "/v1/campaigns", string(adminKey), `{"total":"6.00","count":5}`, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r3.Status, "%s", r3.Body)
	require.Equal(t, "idempotency_mismatch", r3.errorCode(t))
	// The same total and count with another split, minimum or time is
	// another campaign; the first one's seed given explicitly is the same.
	opens := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, other := range []string{`{"total":"5.00","count":5,"split":"fixed"}`, `{"total":"5.00","count":5,"min_cents":50}`,
		`{"total":"5.00","count":5,"max":"2.00"}`, `{"total":"5.00","count":5,"opens_at":"` + opens + `"}`, `{"total":"5.00","count":5,"seed":1}`} {
		r := ts.do(t, "POST", "/v1/campaigns", string(adminKey), other, "Idempotency-Key", key)
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", other, r.Body)
	}
	r5 := ts.do(t, "POST", "/v1/campaigns", string(adminKey),
		fmt.Sprintf(`{"total_cents":500,"count":5,"split":"double-average","min":"0.01","seed":%s,"closes_at":%q}`,
			r1.json(t)["seed"], r1.json(t)["closes_at"]), "Idempotency-Key", key)
	require.Equal(t, http.StatusOK, r5.Status, "%s", r5.Body)
	require.Equal(t, r1.json(t)["id"], r5.json(t)["id"])
	r4 := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", "has space")
	require.Equal(t, http.StatusBadRequest, r4.Status)
	r4.errorCode(t)
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.create(t, `{"total":"1.00","count":2}`)
	ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "m1"), "")
	require.Equal(t, http.StatusOK, ts.do(t, "GET", "/healthz", "", "").Status)
	r := ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = ts.do(t, "GET", "/metrics", string(adminKey), "")
	require.Equal(t, http.StatusOK, r.Status)
	for _, m := range []string{
		`hongbao_grabs_total{outcome="granted"}`, "hongbao_grab_duration_seconds_bucket", "hongbao_grab_batch_size_bucket",
		`hongbao_campaign_pool_remaining_packets{campaign="` + id + `"} 1`, "hongbao_settlement_lag_entries",
		"hongbao_settlement_oldest_pending_seconds", "hongbao_settlement_dead_entries",
		`hongbao_http_requests_total{code="201",route="POST /v1/campaigns"} 1`, "hongbao_redis_fsync_always 0",
	} {
		require.Contains(t, string(r.Body), m)
	}
	ts.Server.Stopping()
	r = ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.Equal(t, "not_ready", r.errorCode(t))
}

// TestReadyzLedgerDown: with the ledger down a process is degraded, not
// out of service (grabs of opened blocks and reads go on): /readyz stays
// 200, and its body says the ledger is unreachable.
func TestReadyzLedgerDown(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	r := ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]any{"redis": "ok", "ledger": "ok"}, r.json(t)["checks"])
	ts = newTestServer(t, nil)
	require.NoError(t, ts.Ledger.Close())
	r = ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "ready", r.json(t)["status"])
	require.Equal(t, map[string]any{"redis": "ok", "ledger": "unreachable: see the log"}, r.json(t)["checks"])
}

// healthStore is the engine as a Store whose Health says h.
type healthStore struct {
	*hongbao.Engine
	h hongbao.Health
}

func (s healthStore) Health(context.Context) hongbao.Health { return s.h }

// TestReadyzRedis: /readyz is 503 while Redis refuses writes (the code
// of its refusal in the body) and while fewer replicas are attached than
// the engine waits for (attached against wanted), with every check's
// reading; ready again once they are back.
func TestReadyzRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h      hongbao.Health
		checks map[string]any
		msg    string
	}{
		{hongbao.Health{Redis: "READONLY"}, map[string]any{"redis": "refuses writes: READONLY", "ledger": "ok"},
			"not ready: redis: refuses writes: READONLY"},
		{hongbao.Health{Redis: "NOREPLICAS", Wanted: 1}, map[string]any{"redis": "refuses writes: NOREPLICAS", "ledger": "ok"},
			"not ready: redis: refuses writes: NOREPLICAS"},
		{hongbao.Health{Redis: "ok", Wanted: 2, Replicas: 1}, map[string]any{"redis": "ok", "replicas": "1 of 2 replicas attached", "ledger": "ok"},
			"not ready: replicas: 1 of 2 replicas attached"},
		{hongbao.Health{Redis: "unreachable", Err: context.DeadlineExceeded}, map[string]any{"redis": "unreachable: timeout", "ledger": "ok"},
			"not ready: redis: unreachable: timeout"},
	} {
		ts := newTestServer(t, func(c *httpapi.Config) { c.Store = healthStore{Engine: c.Engine.(*hongbao.Engine), h: tc.h} })
		r := ts.do(t, "GET", "/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		m := r.json(t)
		require.Equal(t, "not_ready", m["status"])
		require.Equal(t, tc.checks, m["checks"])
		require.Equal(t, map[string]any{"code": "not_ready", "message": tc.msg}, m["error"])
	}
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Store = healthStore{Engine: c.Engine.(*hongbao.Engine), h: hongbao.Health{Redis: "ok", Wanted: 1, Replicas: 1}}
	})
	r := ts.do(t, "GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, map[string]any{"redis": "ok", "replicas": "ok", "ledger": "ok"}, r.json(t)["checks"])
}

// TestIdempotencyKeyOfRetiredCampaign: once a campaign made with an
// Idempotency-Key is gone from Redis (settled, retired, expired) but known
// to the ledger, the key is refused rather than making a new campaign
// under the settled one's id.
func TestIdempotencyKeyOfRetiredCampaign(t *testing.T) {
	t.Parallel()
	var led ledger.Ledger
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.Retired = func(ctx context.Context, id string) (bool, error) {
			tt, err := led.Totals(ctx, id)
			return tt.Funded > 0, err
		}
	})
	led = ts.Ledger
	ctx := context.Background()
	key := "retired-" + fmt.Sprint(time.Now().UnixNano())
	body := `{"total":"5.00","count":5}`
	r := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.json(t)["id"].(string)
	require.NoError(t, led.Fund(ctx, ledger.Campaign{ID: id, Funding: "platform", Total: 500}))

	// Still in Redis: a retry replays it.
	r = ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, id, r.json(t)["id"])

	// Its keys expire after the retention.
	k := redisstore.Default.CampaignKeys(id)
	c := ts.Redis.Client
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.Meta, k.Pool, k.Claims, k.Grants, k.Dead, k.Staging).Build()).Error())
	require.NoError(t, c.Do(ctx, c.B().Zrem().Key(redisstore.Default.Index(redisstore.RedPacket)).Member(id).Build()).Error())
	r = ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	require.Equal(t, "idempotency_mismatch", r.errorCode(t))
	_, err := ts.Engine.Status(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound, "a campaign was made again under the retired id")

	// A ledger that cannot be read: 503, nothing created, no error text.
	require.NoError(t, led.Close())
	r = ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key+"-2")
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	require.Equal(t, "unavailable", r.errorCode(t))
	require.NotContains(t, string(r.Body), "sql")
}
