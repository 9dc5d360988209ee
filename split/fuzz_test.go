package split

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSplit feeds arbitrary specs to Split: whatever the input, it must
// either refuse the spec with ErrInvalidSpec or return a valid split, and
// never panic. Counts are folded below 5000 to keep each run fast; large
// counts are covered by the benchmarks and TestLineCut.
func FuzzSplit(f *testing.F) {
	f.Add(int64(1000), 10, int64(0), int64(0), byte(0), uint64(1))
	f.Add(int64(1000), 10, int64(1), int64(100), byte(1), uint64(2))
	f.Add(int64(1000), 999, int64(0), int64(0), byte(2), uint64(3))
	f.Add(int64(1001), 10, int64(0), int64(101), byte(3), uint64(4))
	f.Add(MaxTotal, 4999, int64(7), MaxTotal/4999+1, byte(2), uint64(5))
	f.Add(MaxTotal+1, 1, int64(0), int64(0), byte(1), uint64(6))
	f.Add(int64(100), 0, int64(-1), int64(-1), byte(4), uint64(7))
	f.Fuzz(func(t *testing.T, total int64, count int, mn, mx int64, alg byte, seed uint64) {
		count %= 5000
		algs := []Algorithm{"", DoubleAverage, LineCut, Fixed, "no-such-algorithm"}
		s := Spec{Total: total, Count: count, Min: mn, Max: mx, Algorithm: algs[int(alg)%len(algs)]}
		got, err := Split(s, seed)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidSpec)
			return
		}
		norm, err := s.Normalize()
		require.NoError(t, err)
		requireValid(t, norm, got)
	})
}
