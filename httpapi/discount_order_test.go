package httpapi_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestDiscountOrderMismatchOverHTTP: the same order reserved again with
// another order amount is 409 order_mismatch, held or confirmed (the
// Idempotency-Key rule: the same key, another request, refused); the same
// amount answers already.
func TestDiscountOrderMismatchOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.createDiscount(t, `{"budget":"8.00","quota":10,"min":"0.80","max":"0.80"}`)
	pay := string(paymentKey)
	base := "/v1/discounts/" + id
	r := ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o","order_amount":"10.00"}`)
	require.Equal(t, "reserved", r.json(t)["outcome"], "%s", r.Body)
	require.EqualValues(t, 80, r.json(t)["amount_cents"])
	for _, confirmed := range []bool{false, true} {
		r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o","order_amount":"0.50"}`)
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		require.Equal(t, "order_mismatch", r.errorCode(t))
		r = ts.do(t, "POST", base+"/reserve", pay, `{"user_id":"alice","order_id":"o","order_amount_cents":1000}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "already", r.json(t)["outcome"])
		if !confirmed {
			r = ts.do(t, "POST", base+"/orders/o/confirm", pay, `{"user_id":"alice"}`)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
	}
}

// TestDiscountRetiredByTheEngine: with no Retired check of its own, the
// server still refuses an Idempotency-Key of a discount campaign settled
// and gone from Redis: the engine, given the ledger, refuses its id (422
// idempotency_mismatch), and makes nothing.
func TestDiscountRetiredByTheEngine(t *testing.T) {
	t.Parallel()
	led, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	rc := testenv.SharedRedis(t).Client
	ts := newTestServer(t, func(c *httpapi.Config) {
		eng, err := hongbao.New(hongbao.Config{Redis: rc, Packets: led})
		require.NoError(t, err)
		c.Engine = eng
	})
	ctx := context.Background()
	key := "retired-e-" + time.Now().Format(time.RFC3339Nano)
	body := `{"budget":"5.00","quota":5}`
	r := ts.do(t, "POST", "/v1/discounts", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.json(t)["id"].(string)
	require.NoError(t, led.Fund(ctx, ledger.Campaign{ID: ledger.DiscountCampaign(id), Funding: "platform", Total: 500}))
	k := redisstore.Default.DiscountShardKeys(id, 1, 0)
	c := ts.Redis.Client
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.Meta, k.Pool, k.Confirms).Build()).Error())
	r = ts.do(t, "POST", "/v1/discounts", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	require.Equal(t, "idempotency_mismatch", r.errorCode(t))
	n, err := c.Do(ctx, c.B().Exists().Key(k.Meta).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "nothing made under the retired id")
}

// TestCampaignLostRefusedByTheEngine: a red packet campaign whose first
// grab opened a block recorded in the ledger, and which Redis then lost,
// is not created again by a retried create (its packets could go to a
// second user): 422 idempotency_mismatch, naming the rebuild, not 500.
func TestCampaignLostRefusedByTheEngine(t *testing.T) {
	t.Parallel()
	led, err := open.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	rc := testenv.SharedRedis(t).Client
	ts := newTestServer(t, func(c *httpapi.Config) {
		eng, err := hongbao.New(hongbao.Config{Redis: rc, Packets: led})
		require.NoError(t, err)
		c.Engine = eng
	})
	ctx := context.Background()
	key := "lost-" + time.Now().Format(time.RFC3339Nano)
	body := `{"total":"5.00","count":5}`
	r := ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.json(t)["id"].(string)
	r = ts.do(t, "POST", "/v1/campaigns/"+id+"/grab", token(t, "alice"), "")
	require.Equal(t, "granted", r.json(t)["outcome"], "%s", r.Body)
	k := redisstore.Default.CampaignKeys(id)
	c := ts.Redis.Client
	require.NoError(t, c.Do(ctx, c.B().Del().Key(k.Meta, k.Pool, k.Claims, k.Grants).Build()).Error())
	r = ts.do(t, "POST", "/v1/campaigns", string(adminKey), body, "Idempotency-Key", key)
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	require.Equal(t, "idempotency_mismatch", r.errorCode(t))
	require.Contains(t, string(r.Body), "rebuild")
	n, err := c.Do(ctx, c.B().Exists().Key(k.Meta).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "nothing made under the lost id")
}
