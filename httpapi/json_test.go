package httpapi

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// TestAppendGrantMatchesEncodingJSON holds the hand-written grab answer to
// what encoding/json makes of the same grantOut, byte for byte.
func TestAppendGrantMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	cents := []int64{0, 1, 9, 10, 99, 100, 101, 12345, -1, -5, -100, -105, math.MaxInt64, math.MinInt64, 1<<53 - 1}
	for range 2000 {
		cents = append(cents, r.Int64N(1_000_000_000)-1000)
	}
	outcomes := []hongbao.Outcome{hongbao.Granted, hongbao.Already, hongbao.SoldOut, hongbao.NotOpen, hongbao.Closed}
	for i, c := range cents {
		o := outcomes[i%len(outcomes)]
		g := hongbao.Grant{Campaign: "camp_-9Z", User: "u1", Outcome: o, Seq: r.Int64N(10_000_001), Cents: c}
		for _, name := range []string{o.String(), ""} {
			want, err := json.Marshal(grantJSON(g, name))
			require.NoError(t, err)
			require.Equal(t, string(want)+"\n", string(appendGrant(nil, g, name)), "grant %+v outcome %q", g, name)
		}
	}
}

func BenchmarkGrantAnswer(b *testing.B) {
	g := hongbao.Grant{Campaign: "rain-2026", User: "u1", Outcome: hongbao.Granted, Seq: 123456, Cents: 777}
	b.Run("appendGrant", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		for b.Loop() {
			buf = appendGrant(buf[:0], g, "granted")
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(grantJSON(g, "granted"))
		}
	})
}
