package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPacketRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]int64{{1, 1}, {10_000_000, 1<<53 - 1}, {42, 710}} {
		seq, cents, err := ParseClaim(FormatPacket(c[0], c[1]))
		require.NoError(t, err)
		require.Equal(t, c, [2]int64{seq, cents})
	}
	for _, bad := range []string{"", "1", ":", "1:", ":1", "0:5", "5:0", "-1:5", "a:b", "1:2:3", "99999999999999999999:1"} {
		_, _, err := ParseClaim(bad)
		require.ErrorIs(t, err, ErrCorrupt, bad)
	}
}

func TestLessID(t *testing.T) {
	t.Parallel()
	require.True(t, lessID("1-0", "2-0"))
	require.True(t, lessID("1-2", "1-10"))
	require.True(t, lessID("9-0", "10-0"))
	require.False(t, lessID("10-0", "9-99"))
	require.False(t, lessID("5-5", "5-5"))
}

func FuzzParseClaim(f *testing.F) {
	f.Add("12:345")
	f.Add("1:")
	f.Fuzz(func(t *testing.T, s string) {
		seq, cents, err := ParseClaim(s)
		if err != nil {
			return
		}
		require.Positive(t, seq)
		require.Positive(t, cents)
		s2, c2, err := ParseClaim(FormatPacket(seq, cents))
		require.NoError(t, err)
		require.Equal(t, [2]int64{seq, cents}, [2]int64{s2, c2})
	})
}

// The hot path's encoding: what the engine does per grant in Go.
func BenchmarkFormatPacket(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		_ = FormatPacket(int64(i), 12345)
	}
}

func BenchmarkParseClaim(b *testing.B) {
	for b.Loop() {
		_, _, _ = ParseClaim("1234567:12345")
	}
}
