package httpapi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// FuzzDecodeDiscount: the discount create decoder never panics, refuses
// with a request error (or the engine's *SpecError), and what it accepts
// the engine accepts.
func FuzzDecodeDiscount(f *testing.F) {
	for _, s := range []string{
		`{"budget":"1000.00","quota":800,"min":"0.01","max":"5.00","per_user_count":3,"per_user_amount":"8.00","shards":4,"hold":"30s"}`,
		`{"budget_cents":100,"quota":1}`, `{"budget":"1.00","budget_cents":100,"quota":1}`, `{"budget":"5","quota":5,"min":"1"}`,
		`{"budget":"1e3","quota":1}`, `{"quota":-1}`, `[]`, `null`, ``, `{"a":1}`, `{"budget":"1.00","quota":1}x`,
		`{"budget":"10.00","quota":10,"hold":"-1s"}`, `{"budget":"10.00","quota":10,"opens_at":"2030-01-01T00:00:00Z","closes_at":"2029-01-01T00:00:00Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeDiscount(body, 1000)
		if err != nil {
			var re *requestError
			var se *hongbao.SpecError
			require.True(t, errorsAs(err, &re) || errorsAs(err, &se), "%v", err)
			if re != nil {
				require.Equal(t, 400, re.httpStatus())
				require.NotEmpty(t, re.code)
			}
			return
		}
		require.NoError(t, spec.Validate())
		require.LessOrEqual(t, spec.Quota, 1000)
	})
}

// FuzzDecodeReserve: the reserve decoder never panics, and what it
// accepts is a valid order id and a positive amount.
func FuzzDecodeReserve(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-1","order_id":"o-1","order_amount":"35.20"}`, `{"user_id":"u","order_id":"o","order_amount_cents":1}`,
		`{"order_id":"o-1","order_amount":"35.20"}`, `{"user_id":"a b","order_id":"o","order_amount":"1"}`,
		`{"order_id":"a/b","order_amount":"1"}`, `{"order_id":"o","order_amount":"0"}`, `{}`, ``, `{"order_id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rv, err := decodeReserve(body)
		if err != nil {
			var re *requestError
			require.True(t, errorsAs(err, &re), "%v", err)
			require.Equal(t, 400, re.httpStatus())
			return
		}
		require.NoError(t, hongbao.ValidateUserID(rv.user))
		require.NoError(t, hongbao.ValidateOrderID(rv.order))
		require.Positive(t, rv.cents)
	})
}

func errorsAs[T any](err error, target *T) bool { return errors.As(err, target) }
