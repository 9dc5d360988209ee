package split

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChooseCutsDistinctSorted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		k    int
		m    uint64
	}{
		{"one of one", 1, 1},
		{"dense", 10, 100},
		{"dense complement", 90, 100},
		{"dense every position", 50, 50},
		{"dense complement, partial last word", 60, 70},
		{"dense at the threshold", 1000, 1000 * denseFactor},
		{"sparse just past the threshold", 1000, 1000*denseFactor + 1},
		{"sparse on the longest line", 1000, uint64(MaxTotal - 1)},
		{"sparse, many cuts", 200_000, 1 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(5) {
				dst := make([]int64, tt.k)
				chooseCuts(dst, tt.m, newRNG(seed))
				prev := int64(0)
				for i, v := range dst {
					if v <= prev || v > int64(tt.m) {
						require.Failf(t, "cuts not distinct, sorted and within the line",
							"cut %d = %d after %d, line 1..%d", i, v, prev, tt.m)
					}
					prev = v
				}
			}
		})
	}
}

func TestLineCut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec Spec
	}{
		{"every cent a packet", Spec{Total: 1000, Count: 1000}},
		{"dense: one spare cent", Spec{Total: 1000, Count: 999}},
		{"dense: complement of the cuts", Spec{Total: 1000, Count: 700}},
		{"dense with min", Spec{Total: 5000, Count: 1000, Min: 4}},
		{"forced by min", Spec{Total: 5000, Count: 1000, Min: 5}},
		{"one packet", Spec{Total: 777, Count: 1}},
		{"sparse", Spec{Total: 1_000_000, Count: 1000}},
		{"sparse on the longest line", Spec{Total: MaxTotal, Count: 1000, Min: 1_000_000}},
		{"sparse, many packets", Spec{Total: 1_000_000_000, Count: 50_000}},
		{"max: some repair", Spec{Total: 10_000, Count: 100, Max: 300}},
		{"max: heavy repair", Spec{Total: 10_000, Count: 100, Max: 110}},
		{"max: forced", Spec{Total: 10_000, Count: 100, Max: 100}},
		{"max: one cent of room", Spec{Total: 100_000 - 1, Count: 1000, Max: 100}},
		{"max with min", Spec{Total: 1_000_000, Count: 1000, Min: 500, Max: 1500}},
		{"max on the longest line", Spec{Total: MaxTotal, Count: 1000, Max: MaxTotal/1000 + 1000}},
		{"max, many packets nearly full", Spec{Total: 20_000*1000 - 1, Count: 20_000, Max: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.spec.Algorithm = LineCut
			s, err := tt.spec.Normalize()
			require.NoError(t, err)
			for seed := range uint64(3) {
				// Before the shuffle, so a bug the shuffle would hide
				// (say, a cut at 0 giving an empty first packet) shows up.
				drawn := draw(s, newRNG(seed))
				requireValid(t, s, drawn)
				got, err := Split(s, seed)
				require.NoError(t, err)
				requireValid(t, s, got)
			}
		})
	}
}

// TestLineCutIsUneven distinguishes line-cut from double-average by a
// property of uniform compositions: the largest of 100 packets is typically
// several times the average, while double-average keeps amounts near it.
func TestLineCutIsUneven(t *testing.T) {
	t.Parallel()
	largest := func(alg Algorithm) (sum int64) {
		for seed := range uint64(200) {
			got, err := Split(Spec{Total: 10_000, Count: 100, Algorithm: alg}, seed)
			require.NoError(t, err)
			sum += slices.Max(got)
		}
		return sum / 200
	}
	lc, da := largest(LineCut), largest(DoubleAverage)
	t.Logf("mean largest packet of 100, average 100: line-cut %d, double-average %d", lc, da)
	// For a uniform composition the largest share is about avg*H(100) = 519.
	require.Greater(t, lc, int64(400))
	require.Less(t, da, int64(400))
}

func TestRepairMax(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in []int64
		mx int64
	}{
		{[]int64{1000, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 100}, // mirror: take back 90 of 990
		{[]int64{1000, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 101},    // mirror: take back 1
		{[]int64{50, 50, 900}, 500},                        // forward: give 400 of 900
		{[]int64{50, 50, 950}, 500},                        // forward: give exactly half the room
		{[]int64{50, 51, 950}, 500},                        // mirror: take back 449 of 899
		{[]int64{3, 3, 3}, 3},                              // nothing to repair
		{[]int64{7, 1, 1}, 3},                              // forced: take back nothing
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			var total int64
			for _, v := range tt.in {
				total += v
			}
			require.LessOrEqual(t, total, int64(len(tt.in))*tt.mx, "repairMax needs count*max >= total")
			for seed := range uint64(10) {
				out := append([]int64(nil), tt.in...)
				repairMax(out, tt.mx, newRNG(seed))
				var sum int64
				for j, v := range out {
					require.LessOrEqual(t, v, tt.mx)
					if tt.in[j] > tt.mx {
						require.Equal(t, tt.mx, v)
					} else {
						require.GreaterOrEqual(t, v, tt.in[j], "repair only adds to packets under max")
					}
					sum += v
				}
				require.Equal(t, total, sum)
			}
		})
	}
}
