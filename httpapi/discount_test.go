package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// createDiscount makes a discount campaign as admin and returns its id.
func (ts *testServer) createDiscount(t testing.TB, body string) string {
	t.Helper()
	r := ts.do(t, "POST", "/v1/discounts", string(adminKey), body)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id, _ := r.json(t)["id"].(string)
	require.NotEmpty(t, id)
	return id
}

// TestDiscountContract walks the HTTP contract: create, reserve, its
// repeat, confirm and its repeat, cancel in its cases, the status.
func TestDiscountContract(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	admin := string(adminKey)
	r := ts.do(t, "POST", "/v1/discounts", admin,
		`{"budget":"1000.00","quota":800,"min":"0.01","max":"5.00","per_user_count":3,"per_user_amount":"8.00","shards":4,"hold":"30s"}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	c := r.json(t)
	id := c["id"].(string)
	require.Equal(t, map[string]any{"id": id, "state": "open", "opens_at": c["opens_at"], "closes_at": c["closes_at"],
		"budget": "1000.00", "budget_cents": 100000.0, "quota": 800.0, "min": "0.01", "min_cents": 1.0, "max": "5.00",
		"max_cents": 500.0, "per_user_count": 3.0, "per_user_amount": "8.00", "per_user_amount_cents": 800.0,
		"shards": 4.0, "hold": "30s", "funding_account": "platform", "seed": c["seed"], "tail_count": 33.0}, c)

	pay := string(paymentKey)
	base := "/v1/discounts/" + id
	r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o-1","order_amount":"35.20"}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res := r.json(t)
	require.Equal(t, "reserved", res["outcome"])
	require.Equal(t, "o-1", res["order_id"])
	cents := res["amount_cents"].(float64)
	require.True(t, cents >= 1 && cents <= 500)
	exp, err := time.Parse(time.RFC3339Nano, res["expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(30*time.Second), exp, 5*time.Second)
	r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o-1","order_amount":"35.20"}`)
	require.Equal(t, http.StatusOK, r.Status)
	again := r.json(t)
	require.Equal(t, "already", again["outcome"])
	require.Equal(t, res["amount"], again["amount"])
	require.Equal(t, cents, again["amount_cents"])

	confirm := func(user, order string) reply {
		return ts.do(t, "POST", base+"/orders/"+order+"/confirm", pay, `{"user_id":"`+user+`"}`)
	}
	cancel := func(user, order string) reply {
		return ts.do(t, "POST", base+"/orders/"+order+"/cancel", pay, `{"user_id":"`+user+`"}`)
	}
	for range 2 {
		r = confirm("alice", "o-1")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, map[string]any{"outcome": "confirmed", "order_id": "o-1", "amount": res["amount"], "amount_cents": cents}, r.json(t))
	}
	r = cancel("alice", "o-1")
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "confirmed", r.errorCode(t))
	r = confirm("bob", "o-1")
	require.Equal(t, http.StatusNotFound, r.Status, "bob holds no order o-1")
	require.Equal(t, "no_reservation", r.errorCode(t))

	r = ts.do(t, "POST", base+"/reserve", admin, `{"user_id":"alice","order_id":"o-2","order_amount_cents":700}`) // an admin key works too
	require.Equal(t, "reserved", r.json(t)["outcome"])
	for range 2 {
		r = cancel("alice", "o-2")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, map[string]any{"outcome": "cancelled", "order_id": "o-2"}, r.json(t))
	}
	r = confirm("alice", "o-2")
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "cancelled", r.errorCode(t))
	r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o-2","order_amount":"7.00"}`)
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "cancelled", r.errorCode(t))

	r = ts.do(t, "GET", base, admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	st := r.json(t)
	require.EqualValues(t, 100000, st["budget_cents"])
	require.EqualValues(t, 800, st["quota"])
	require.EqualValues(t, 1, st["confirmed_count"])
	require.EqualValues(t, cents, st["confirmed_cents"])
	require.EqualValues(t, 0, st["reserved_count"])
	require.Equal(t, st["budget_cents"], st["confirmed_cents"].(float64)+st["reserved_cents"].(float64)+st["remaining_cents"].(float64))
	require.Equal(t, st["quota"], st["confirmed_count"].(float64)+st["reserved_count"].(float64)+st["remaining_count"].(float64))

	r = ts.do(t, "GET", "/v1/discounts/nope", admin, "")
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, "not_found", r.errorCode(t))
	r = ts.do(t, "POST", "/v1/discounts/nope/reserve", pay, `{"user_id":"alice","order_id":"o","order_amount":"1.00"}`)
	require.Equal(t, http.StatusNotFound, r.Status)
}

// TestDiscountOutcomes: limit, exhausted, not_open and closed answers,
// and a close by an operator.
func TestDiscountOutcomes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	admin := string(adminKey)
	id := ts.createDiscount(t, `{"budget":"2.00","quota":2,"min":"1.00","max":"1.00","per_user_count":1}`)
	base := "/v1/discounts/" + id
	outcome := func(user, order string) string {
		r := ts.do(t, "POST", base+"/reserve", string(paymentKey), `{"user_id":"`+user+`","order_id":"`+order+`","order_amount":"9.99"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := r.json(t)
		if m["outcome"] != "reserved" && m["outcome"] != "already" {
			require.NotContains(t, m, "amount")
		}
		return m["outcome"].(string)
	}
	require.Equal(t, "reserved", outcome("a", "1"))
	require.Equal(t, "limit", outcome("a", "2"))
	require.Equal(t, "reserved", outcome("b", "1"))
	require.Equal(t, "exhausted", outcome("c", "1"))
	r := ts.do(t, "POST", base+"/close", admin, "")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "operator", r.json(t)["close_reason"])
	require.Equal(t, "closed", outcome("d", "1"))
	r = ts.do(t, "POST", base+"/orders/1/confirm", string(paymentKey), `{"user_id":"a"}`)
	require.Equal(t, http.StatusOK, r.Status, "a hold made before the close is confirmed after it")

	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	id2 := ts.createDiscount(t, `{"budget":"2.00","quota":2,"opens_at":"`+later+`"}`)
	r = ts.do(t, "POST", "/v1/discounts/"+id2+"/reserve", string(paymentKey), `{"user_id":"a","order_id":"1","order_amount":"1.00"}`)
	require.Equal(t, "not_open", r.json(t)["outcome"])
}

// TestDiscountBadInput: every refusal of the contract, with the field
// and the reason in the message.
func TestDiscountBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	admin := string(adminKey)
	for _, tc := range []struct{ body, msg string }{
		{`{"budget":"10.001","quota":10}`, "budget: want a decimal amount with at most two decimals"},
		{`{"budget":"ten","quota":10}`, "budget: want a decimal amount"},
		{`{"budget":"10.00","quota":0}`, "quota: must be within 1 and"},
		{`{"budget":"10.00","quota":10,"min":"2.00","max":"1.00"}`, "min: 2.00 is above max 1.00"},
		{`{"budget":"10.00","quota":10,"max":"11.00"}`, "max: 11.00 is above the budget 10.00"},
		{`{"budget":"10.00","quota":10,"min":"1.01"}`, "min: 10 discounts of at least 1.01 cost more than the budget 10.00"},
		{`{"budget":"10.00","quota":10,"max":"0.99"}`, "max: 10 discounts of at most 99 cents cannot spend the budget of 1000 cents"},
		{`{"budget":"10.00","quota":10,"min":"0.50","per_user_amount":"0.49"}`, "per_user_amount: 0.49 is below min 0.50"},
		{`{"budget":"10.00","quota":10,"per_user_count":0}`, "per_user_count: must be at least 1"},
		{`{"budget":"10.00","quota":10,"hold":"999ms"}`, "hold: must be within 1s and 24h, got 999ms"},
		{`{"budget":"10.00","quota":10,"hold":"25h"}`, "hold: must be within 1s and 24h, got 25h0m0s"},
		{`{"budget":"10.00","quota":10,"hold":"soon"}`, `hold: want a duration such as "30s"`},
		{`{"budget":"10.00","quota":10,"shards":11}`, "shards: 11 shards need a quota of at least as many, got 10"},
		{`{"budget":"10.00","quota":10,"bonus":1}`, `unknown field "bonus"`},
		{`{"budget":"10.00","budget":"11.00","quota":10}`, `field "budget" is given twice`},
	} {
		r := ts.do(t, "POST", "/v1/discounts", admin, tc.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tc.body, r.Body)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &e))
		require.Contains(t, e.Error.Message, tc.msg, tc.body)
	}
	id := ts.createDiscount(t, `{"budget":"10.00","quota":10}`)
	alice, pay := token(t, "alice"), string(paymentKey)
	for _, tc := range []struct{ path, body, code, msg string }{
		{"/reserve", `{"user_id":"alice","order_id":"o-1","order_amount":"0.00"}`, "invalid_request", "order_amount: must be at least 0.01"},
		{"/reserve", `{"user_id":"alice","order_id":"o-1","order_amount":"0"}`, "invalid_request", "order_amount"},
		{"/reserve", `{"user_id":"alice","order_id":"o-1"}`, "invalid_request", "order_amount or order_amount_cents is required"},
		{"/reserve", `{"user_id":"alice","order_id":"` + strings.Repeat("o", 65) + `","order_amount":"1.00"}`, "invalid_id", "order_id: order ids are 1 to 64"},
		{"/reserve", `{"user_id":"alice","order_id":"o/1","order_amount":"1.00"}`, "invalid_id", "order_id"},
		{"/reserve", `{"user_id":"alice","order_id":"o 1","order_amount":"1.00"}`, "invalid_id", "order_id"},
		{"/reserve", `{"user_id":"alice","order_amount":"1.00"}`, "invalid_request", "order_id is required"},
		{"/reserve", `{"order_id":"o-1","order_amount":"1.00"}`, "invalid_request", "user_id is required"},
		{"/reserve", `{"user_id":"a b","order_id":"o-1","order_amount":"1.00"}`, "invalid_id", "user_id: user ids are 1 to 64"},
		{"/orders/" + strings.Repeat("o", 65) + "/confirm", `{"user_id":"alice"}`, "invalid_id", "order_id"},
		{"/orders/o%2A1/cancel", `{"user_id":"alice"}`, "invalid_id", "order_id"},
		{"/orders/o-1/confirm", `{"user_id":"alice","x":1}`, "invalid_json", `unknown field`},
		{"/orders/o-1/confirm", ``, "invalid_json", `the body is empty`},
		{"/orders/o-1/cancel", `{}`, "invalid_request", `user_id is required`},
	} {
		r := ts.do(t, "POST", "/v1/discounts/"+id+tc.path, pay, tc.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %s", tc.path, tc.body, r.Body)
		require.Equal(t, tc.code, r.errorCode(t), "%s %s", tc.path, tc.body)
		require.Contains(t, string(r.Body), tc.msg, "%s %s", tc.path, tc.body)
	}
	// The keys are checked: neither a user token nor a payment key
	// creates.
	r := ts.do(t, "POST", "/v1/discounts", alice, `{"budget":"10.00","quota":10}`)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	r = ts.do(t, "POST", "/v1/discounts", pay, `{"budget":"10.00","quota":10}`)
	require.Equal(t, http.StatusUnauthorized, r.Status)
}

// TestDiscountExpiresOverHTTP: a reservation not confirmed within its hold
// answers 409 expired, by the Redis clock, and its amount went back.
func TestDiscountExpiresOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.createDiscount(t, `{"budget":"1.00","quota":1,"hold":"1s"}`)
	pay := string(paymentKey)
	base := "/v1/discounts/" + id
	r := ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o","order_amount":"5.00"}`)
	require.Equal(t, "reserved", r.json(t)["outcome"])
	exp, err := time.Parse(time.RFC3339Nano, r.json(t)["expires_at"].(string))
	require.NoError(t, err)
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		now, err := ts.Redis.Client.Do(ctx, ts.Redis.Client.B().Time().Build()).AsIntSlice()
		require.NoError(t, err)
		if time.Unix(now[0], now[1]*1000).After(exp) {
			break
		}
		require.True(t, time.Now().Before(deadline))
		time.Sleep(10 * time.Millisecond) // the hold ends by the Redis clock
	}
	r = ts.do(t, "POST", base+"/orders/o/confirm", pay, `{"user_id":"alice"}`)
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	require.Equal(t, "expired", r.errorCode(t))
	_, err = ts.Engine.Discounts().Reap(ctx, id)
	require.NoError(t, err)
	r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"bob","order_id":"o","order_amount":"5.00"}`)
	require.Equal(t, "reserved", r.json(t)["outcome"], "the expired amount went back")
	r = ts.do(t, "POST", base+"/orders/o/cancel", pay, `{"user_id":"alice"}`)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "expired", r.json(t)["outcome"])
}

// TestDiscountIdempotentCreateAndMetrics: an Idempotency-Key replays the
// same campaign; /metrics shows the outcomes and the campaign's gauges.
func TestDiscountIdempotentCreateAndMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	admin := string(adminKey)
	body := `{"budget":"10.00","quota":10,"per_user_count":1}`
	key := "disc-" + t.Name() + time.Now().Format(time.RFC3339Nano)
	r1 := ts.do(t, "POST", "/v1/discounts", admin, body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r1.Status, "%s", r1.Body)
	r2 := ts.do(t, "POST", "/v1/discounts", admin, body, "Idempotency-Key", key)
	require.Equal(t, http.StatusOK, r2.Status, "%s", r2.Body)
	require.Equal(t, r1.json(t)["id"], r2.json(t)["id"])
	r3 := ts.do(t, "POST", "/v1/discounts", admin, `{"budget":"10.00","quota":5}`, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r3.Status)

	id := r1.json(t)["id"].(string)
	pay := string(paymentKey)
	ts.do(t, "POST", "/v1/discounts/"+id+"/reserve", pay, `{"user_id":"alice","order_id":"1","order_amount":"1.00"}`)
	ts.do(t, "POST", "/v1/discounts/"+id+"/reserve", pay, `{"user_id":"alice","order_id":"2","order_amount":"1.00"}`)
	ts.do(t, "POST", "/v1/discounts/"+id+"/orders/1/confirm", pay, `{"user_id":"alice"}`)
	m := ts.do(t, "GET", "/metrics", string(adminKey), "")
	body2 := string(m.Body)
	for _, want := range []string{
		`hongbao_discount_reserves_total{outcome="reserved"} 1`,
		`hongbao_discount_reserves_total{outcome="limit"} 1`,
		`hongbao_discount_confirms_total{outcome="confirmed"} 1`,
		`hongbao_discount_confirmed_count{campaign="` + id + `"} 1`,
		`hongbao_discount_remaining_count{campaign="` + id + `"} 9`,
		`hongbao_discount_reserved_cents{campaign="` + id + `"} 0`,
	} {
		require.Contains(t, body2, want)
	}
}

// TestDiscountIdempotencyKeyOfRetiredCampaign: a discount campaign made
// with an Idempotency-Key, settled and gone from Redis but known to the
// ledger, is not made again under the same id.
func TestDiscountIdempotencyKeyOfRetiredCampaign(t *testing.T) {
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
	key := "retired-d-" + time.Now().Format(time.RFC3339Nano)
	body := `{"budget":"5.00","quota":5}`
	r := ts.do(t, "POST", "/v1/discounts", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.json(t)["id"].(string)
	require.NoError(t, led.Fund(ctx, ledger.Campaign{ID: ledger.DiscountCampaign(id), Funding: "platform", Total: 500}))
	r = ts.do(t, "POST", "/v1/discounts", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusOK, r.Status, "still in Redis: replayed: %s", r.Body)

	k := redisstore.Default.DiscountShardKeys(id, 1, 0)
	c := ts.Redis.Client
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.Meta, k.Pool, k.Confirms).Build()).Error())
	r = ts.do(t, "POST", "/v1/discounts", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	require.Equal(t, "idempotency_mismatch", r.errorCode(t))
}

// TestDiscountPaymentSystemOnly: reserve, confirm and cancel are the
// payment system's. A user's own token is refused there with 403, so no
// user can reserve a discount for an order never paid and confirm it; a
// payment key (any of them, or an admin key) does it for the user named
// in the body; anything else is 401.
func TestDiscountPaymentSystemOnly(t *testing.T) {
	t.Parallel()
	otherPayment := []byte("payment-key-two-0123456789abcdefghij")
	ts := newTestServer(t, func(c *httpapi.Config) {
		c.UserRate = -1
		c.PaymentKeys = append(c.PaymentKeys, otherPayment)
	})
	id := ts.createDiscount(t, `{"budget":"10.00","quota":10}`)
	base := "/v1/discounts/" + id
	mallory := token(t, "mallory")
	reserve := `{"user_id":"mallory","order_id":"o-1","order_amount":"35.20"}`
	who := `{"user_id":"mallory"}`
	for _, c := range []struct{ path, body string }{
		{"/reserve", reserve}, {"/orders/o-1/confirm", who}, {"/orders/o-1/cancel", who},
		{"/reserve", `{"order_id":"o-1","order_amount":"35.20"}`}, {"/orders/o-1/confirm", ""},
	} {
		r := ts.do(t, "POST", base+c.path, mallory, c.body)
		require.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", c.path, c.body, r.Body)
		require.Equal(t, "forbidden", r.errorCode(t))
		for _, bad := range []string{"", "not-a-key", string(paymentKey) + "x"} {
			r := ts.do(t, "POST", base+c.path, bad, c.body)
			require.Equal(t, http.StatusUnauthorized, r.Status, "%q %s: %s", bad, c.path, r.Body)
			require.Equal(t, "unauthorized", r.errorCode(t))
		}
	}
	r := ts.do(t, "GET", base, string(adminKey), "")
	require.EqualValues(t, 0, r.json(t)["reserved_count"], "nothing was reserved by the refused calls")

	r = ts.do(t, "POST", base+"/reserve", string(paymentKey), reserve)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "reserved", r.json(t)["outcome"])
	r = ts.do(t, "POST", base+"/orders/o-1/confirm", string(otherPayment), who)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "confirmed", r.json(t)["outcome"])
}

// TestDiscountNoHoarding: a campaign created without per-user limits
// gives one discount per user, so one user cannot hold a second open
// reservation (nor the quota); a campaign open to hoarding says so with
// per_user_unlimited, and its answer says it too.
func TestDiscountNoHoarding(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *httpapi.Config) { c.UserRate = -1 })
	pay := string(paymentKey)
	reserve := func(id, order string) string {
		r := ts.do(t, "POST", "/v1/discounts/"+id+"/reserve", pay, `{"user_id":"hoarder","order_id":"`+order+`","order_amount":"9.99"}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return r.json(t)["outcome"].(string)
	}
	r := ts.do(t, "POST", "/v1/discounts", string(adminKey), `{"budget":"10.00","quota":10}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	c := r.json(t)
	require.EqualValues(t, 1, c["per_user_count"])
	require.NotContains(t, c, "per_user_unlimited")
	id := c["id"].(string)
	require.Equal(t, "reserved", reserve(id, "o-1"))
	require.Equal(t, "limit", reserve(id, "o-2"), "a second open reservation of one user")

	r = ts.do(t, "POST", "/v1/discounts", string(adminKey), `{"budget":"10.00","quota":10,"per_user_unlimited":true}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	c = r.json(t)
	require.Equal(t, true, c["per_user_unlimited"])
	require.NotContains(t, c, "per_user_count")
	open := c["id"].(string)
	require.Equal(t, "reserved", reserve(open, "o-1"))
	require.Equal(t, "reserved", reserve(open, "o-2"))

	for _, body := range []string{
		`{"budget":"10.00","quota":10,"per_user_unlimited":true,"per_user_count":2}`,
		`{"budget":"10.00","quota":10,"per_user_amount":"100000000000000000.00"}`,
		`{"budget":"10.00","quota":10,"per_user_amount_cents":9223372036854775807}`,
	} {
		r = ts.do(t, "POST", "/v1/discounts", string(adminKey), body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", body, r.Body)
		require.Equal(t, "invalid_request", r.errorCode(t), body)
	}
}
