package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/split"
)

// FuzzDecodeCreate: the create decoder never panics, refuses with a
// request error, and what it accepts is a spec the split takes.
func FuzzDecodeCreate(f *testing.F) {
	for _, s := range []string{
		`{"total":"100.00","count":10}`,
		`{"total_cents":100,"count":1,"split":"fixed","seed":7}`,
		`{"total":"1.00","total_cents":100,"count":1}`,
		`{"total":"5","count":2,"min":"1","max_cents":400,"opens_at":"2030-01-01T00:00:00Z","closes_at":"2030-01-02T00:00:00+08:00"}`,
		`{"total":"1e3","count":1}`, `{"count":-1}`, `[]`, `null`, ``, `{"a":1}`, `{"total":"1.00","count":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := decodeCreate(body, 1000)
		if err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
			require.GreaterOrEqual(t, re.httpStatus(), 400)
			require.Less(t, re.httpStatus(), 500)
			require.NotEmpty(t, re.code)
			return
		}
		require.GreaterOrEqual(t, spec.Total, int64(1))
		require.LessOrEqual(t, spec.Total, split.MaxTotal)
		require.GreaterOrEqual(t, spec.Count, 1)
		require.LessOrEqual(t, spec.Count, 1000)
		_, err = split.Spec{Total: spec.Total, Count: spec.Count, Min: spec.Min, Max: spec.Max, Algorithm: spec.Split}.Normalize()
		require.NoError(t, err)
	})
}

// FuzzDecodeEmpty: the grab and close body decoder never panics and
// accepts only an empty body or an empty object.
func FuzzDecodeEmpty(f *testing.F) {
	for _, s := range []string{``, `{}`, ` { } `, `{"a":1}`, `[]`, `{}{}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := decodeEmpty(body); err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, 400, re.httpStatus())
		}
	})
}
