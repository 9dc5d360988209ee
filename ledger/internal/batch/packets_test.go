package batch

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// TestCheckPackets: the digest is the SHA-256 of the amounts as 8-byte
// big-endian values, whatever the buffering (counts around the buffer of
// 1,024 amounts), and tells apart sets of equal count and sum.
func TestCheckPackets(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 1023, 1024, 1025, 5000} {
		cents := make([]int64, n)
		var raw []byte
		var sum int64
		for i := range cents {
			cents[i] = int64(1 + (i*7919)%1000)
			sum += cents[i]
			raw = binary.BigEndian.AppendUint64(raw, uint64(cents[i]))
		}
		set, err := CheckPackets("c", cents)
		require.NoError(t, err)
		want := sha256.Sum256(raw)
		require.Equal(t, PacketSet{Count: int64(n), Cents: sum, Digest: want[:]}, set, "n=%d", n)
	}

	a, err := CheckPackets("c", []int64{1, 2, 3})
	require.NoError(t, err)
	same, err := CheckPackets("other", []int64{1, 2, 3})
	require.NoError(t, err)
	require.True(t, a.Same(same), "the set does not depend on the campaign id")
	for _, other := range [][]int64{{3, 2, 1}, {2, 2, 2}, {1, 2, 3, 1}, {1, 2}} {
		o, err := CheckPackets("c", other)
		require.NoError(t, err)
		require.False(t, a.Same(o), "%v", other)
	}
	require.Contains(t, a.String(), "3 packets, 6 cents, digest ")
}

func TestCheckPacketsInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		campaign string
		cents    []int64
	}{
		{"no campaign", "", []int64{1}},
		{"no packets", "c", nil},
		{"zero", "c", []int64{1, 0}},
		{"negative", "c", []int64{-3}},
		{"overflow", "c", []int64{math.MaxInt64 - 1, 1, 1}},
	} {
		_, err := CheckPackets(tc.campaign, tc.cents)
		require.ErrorIs(t, err, ledger.ErrInvalid, tc.name)
	}
	set, err := CheckPackets("c", []int64{math.MaxInt64 - 1, 1})
	require.NoError(t, err, "a sum of exactly MaxInt64 fits")
	require.Equal(t, int64(math.MaxInt64), set.Cents)
}
