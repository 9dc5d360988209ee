package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiscountOrderMismatchOverHTTP: the same order reserved again with
// another order amount is 409 order_mismatch, held or confirmed (the
// Idempotency-Key rule: the same key, another request, refused); the same
// amount answers already.
func TestDiscountOrderMismatchOverHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, nil)
	id := ts.createDiscount(t, `{"budget":"8.00","quota":10,"min":"0.80","max":"0.80"}`)
	alice := token(t, "alice")
	base := "/v1/discounts/" + id
	r := ts.do(t, "POST", base+"/reserve", alice, `{"order_id":"o","order_amount":"10.00"}`)
	require.Equal(t, "reserved", r.json(t)["outcome"], "%s", r.Body)
	require.EqualValues(t, 80, r.json(t)["amount_cents"])
	for _, confirmed := range []bool{false, true} {
		r = ts.do(t, "POST", base+"/reserve", alice, `{"order_id":"o","order_amount":"0.50"}`)
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		require.Equal(t, "order_mismatch", r.errorCode(t))
		r = ts.do(t, "POST", base+"/reserve", alice, `{"order_id":"o","order_amount_cents":1000}`)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, "already", r.json(t)["outcome"])
		if !confirmed {
			r = ts.do(t, "POST", base+"/orders/o/confirm", alice, "")
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		}
	}
}
