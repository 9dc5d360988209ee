package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// TestReplayedCreateRegistersOverHTTP: a create retried with its
// Idempotency-Key (200, the same campaign) registers the campaign again
// when its registration was lost: the retry an operator makes after a
// failed create is what puts a live campaign back in the scheduler's
// hands. Red packets and discounts.
func TestReplayedCreateRegistersOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	ctx := context.Background()
	c := ts.Redis.Client
	for _, tc := range []struct{ path, index, body string }{
		{"/v1/campaigns", redisstore.Default.Index(redisstore.RedPacket), `{"total":"5.00","count":5}`},
		{"/v1/discounts", redisstore.Default.Index(redisstore.Discount), `{"budget":"5.00","quota":5}`},
	} {
		key := "register-" + tc.index + "-" + time.Now().Format(time.RFC3339Nano)
		r := ts.do(t, "POST", tc.path, string(adminKey), tc.body, "Idempotency-Key", key)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		id := r.json(t)["id"].(string)
		require.NoError(t, c.Do(ctx, c.B().Zrem().Key(tc.index).Member(id).Build()).Error())

		r = ts.do(t, "POST", tc.path, string(adminKey), tc.body, "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, id, r.json(t)["id"])
		closes, err := time.Parse(time.RFC3339Nano, r.json(t)["closes_at"].(string))
		require.NoError(t, err)
		score, err := c.Do(ctx, c.B().Zscore().Key(tc.index).Member(id).Build()).AsFloat64()
		require.False(t, rueidis.IsRedisNil(err), "%s %s: registered again by the replay", tc.path, id)
		require.NoError(t, err)
		require.EqualValues(t, closes.UnixMilli(), int64(score), "by its close time")
	}
}
