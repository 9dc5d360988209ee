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

// TestStreamPacket: a grants-stream packet has the entry's time, unless it
// carries its own (a redriven or rebuilt grant); claims never take the
// timed form.
func TestStreamPacket(t *testing.T) {
	t.Parallel()
	seq, cents, ms, err := ParseStreamPacket(FormatPacket(7, 710), 1_790_000_000_000)
	require.NoError(t, err)
	require.Equal(t, []int64{7, 710, 1_790_000_000_000}, []int64{seq, cents, ms})
	seq, cents, ms, err = ParseStreamPacket(FormatTimedPacket(7, 710, 1_780_000_000_001), 1_790_000_000_000)
	require.NoError(t, err)
	require.Equal(t, []int64{7, 710, 1_780_000_000_001}, []int64{seq, cents, ms})
	for _, bad := range []string{"", "1", "1:2:", "1:2:0", "1:2:-5", "1:2:x", "1:2:3:4", ":2:3", "0:2:3", "1:0:3", "1::3"} {
		_, _, _, err := ParseStreamPacket(bad, 1)
		require.ErrorIs(t, err, ErrCorrupt, bad)
	}
	_, _, err = ParseClaim(FormatTimedPacket(7, 710, 1))
	require.ErrorIs(t, err, ErrCorrupt, "a claim has no time")
}
