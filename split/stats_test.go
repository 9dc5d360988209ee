package split

import (
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// Statistical tests run with fixed seeds, so they are deterministic: they
// cannot flake. The thresholds are still chosen as if they were random, so
// that a correct implementation passes for almost every seed and a broken
// one fails for almost every seed, and each test shows a broken variant
// failing the very same check.

// maxZ is the fairness tolerance: a position's sample mean may differ from
// total/count by at most 5 standard errors (SE = sample standard deviation
// / sqrt(trials)). Under a correct draw the mean is asymptotically normal,
// so one position exceeds this with probability about 5.7e-7; over the few
// dozen positions tested here a false alarm is about 1e-5.
const maxZ = 5

// worstZ draws trials times and returns the draw position whose mean is
// furthest from want, measured in standard errors.
func worstZ(trials, count int, want float64, drawOnce func() []int64) (z float64, pos int) {
	sum := make([]float64, count)
	sumSq := make([]float64, count)
	for range trials {
		for i, v := range drawOnce() {
			x := float64(v)
			sum[i] += x
			sumSq[i] += x * x
		}
	}
	n := float64(trials)
	for i := range count {
		mean := sum[i] / n
		variance := (sumSq[i] - sum[i]*mean) / (n - 1)
		se := math.Sqrt(variance / n)
		zi := math.Abs(mean-want) / se
		if se == 0 { // a constant position: exact or infinitely wrong
			zi = 0
			if mean != want {
				zi = math.Inf(1)
			}
		}
		if zi > z {
			z, pos = zi, i
		}
	}
	return z, pos
}

// classicDraw is the textbook double-average draw, uniform on [min, 2*avg]
// with avg = R/n. Its mean is avg + min/2, so early positions take more than
// their share: the fairness check must reject it.
func classicDraw(s Spec, g *rng) []int64 {
	out := make([]int64, s.Count)
	rem := s.Total
	last := len(out) - 1
	for i := 0; i < last; i++ {
		n := int64(len(out) - i)
		top := 2 * rem / n
		x := s.Min + g.int64n(top-s.Min+1)
		x = min(x, rem-(n-1)*s.Min)
		out[i] = x
		rem -= x
	}
	out[last] = rem
	return out
}

func TestDoubleAverageFairByPosition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec   Spec
		trials int
	}{
		{Spec{Total: 100, Count: 10}, 200_000},
		{Spec{Total: 1000, Count: 7, Min: 50}, 100_000}, // avg not a whole number of cents
		{Spec{Total: 1003, Count: 4, Min: 200}, 100_000},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.spec.Total, tt.spec.Count), func(t *testing.T) {
			t.Parallel()
			s, err := tt.spec.Normalize()
			require.NoError(t, err)
			want := float64(s.Total) / float64(s.Count)

			g := newRNG(uint64(100 + i))
			z, pos := worstZ(tt.trials, s.Count, want, func() []int64 { return draw(s, g) })
			t.Logf("double-average: worst position %d at %.2f SE", pos, z)
			require.LessOrEqual(t, z, float64(maxZ),
				"position %d mean is %.1f standard errors from %.3f", pos, z, want)

			g = newRNG(uint64(200 + i))
			z, pos = worstZ(tt.trials, s.Count, want, func() []int64 { return classicDraw(s, g) })
			t.Logf("classic: worst position %d at %.2f SE", pos, z)
			require.Greater(t, z, float64(maxZ),
				"the check failed to catch the classic draw's bias (worst: position %d at %.1f SE)", pos, z)
		})
	}
}

// chiSquare returns Pearson's statistic for counts against a uniform
// expectation of expected per cell.
func chiSquare(counts []int, expected float64) float64 {
	var stat float64
	for _, c := range counts {
		d := float64(c) - expected
		stat += d * d / expected
	}
	return stat
}

// Critical values of the chi-square distribution at p = 0.001, for the
// degrees of freedom used below (cells - 1).
const (
	chi2Crit14 = 36.123 // 15 cells
	chi2Crit19 = 43.820 // 20 cells
	chi2Crit23 = 49.728 // 24 cells
)

// permutationCounts shuffles [0 1 2 3] trials times, each time with a fresh
// RNG from a different seed as Split does, and counts how often each
// permutation comes out. The 24 permutations are keyed by their base-4
// digits; any other key would mean the shuffle lost or duplicated elements.
func permutationCounts(t *testing.T, trials int, shuf func([]int64, *rng)) []int {
	t.Helper()
	byKey := map[int]int{}
	xs := make([]int64, 4)
	for seed := range uint64(trials) {
		for i := range xs {
			xs[i] = int64(i)
		}
		shuf(xs, newRNG(seed))
		byKey[int(xs[0]<<6|xs[1]<<4|xs[2]<<2|xs[3])]++
	}
	require.Len(t, byKey, 24, "not every permutation appeared, or some were not permutations")
	counts := make([]int, 0, 24)
	for _, c := range byKey {
		counts = append(counts, c)
	}
	return counts
}

// naiveShuffle swaps each element with any position. Its n^n equally likely
// paths cannot spread evenly over n! permutations (256 is not a multiple of
// 24), so some orders are favoured.
func naiveShuffle(xs []int64, g *rng) {
	for i := range xs {
		j := g.below(uint64(len(xs)))
		xs[i], xs[j] = xs[j], xs[i]
	}
}

func TestShuffleUniform(t *testing.T) {
	t.Parallel()
	const trials = 240_000 // 10,000 expected per permutation
	stat := chiSquare(permutationCounts(t, trials, shuffle), trials/24)
	t.Logf("Fisher-Yates: chi-square %.2f", stat)
	require.Less(t, stat, chi2Crit23, "chi-square over 24 permutations (23 df, p=0.001)")

	stat = chiSquare(permutationCounts(t, trials, naiveShuffle), trials/24)
	t.Logf("naive: chi-square %.2f", stat)
	require.Greater(t, stat, chi2Crit23, "the check failed to catch the naive shuffle")
}

// TestChooseCutsUniform checks that both ways of choosing cut points give
// every subset of positions the same chance, including the dense path's
// complement trick, and that a biased chooser fails the same check.
func TestChooseCutsUniform(t *testing.T) {
	t.Parallel()
	const m = 6
	choosers := map[string]func([]int64, uint64, *rng){
		"dense":  chooseDense,
		"sparse": chooseSparse,
	}
	crit := map[int]float64{2: chi2Crit14, 3: chi2Crit19, 4: chi2Crit14} // C(6,k)-1 df
	for name, choose := range choosers {
		for k := 2; k <= 4; k++ {
			t.Run(fmt.Sprintf("%s/%d-of-%d", name, k, m), func(t *testing.T) {
				t.Parallel()
				subsets := binomial(m, k)
				trials := 4000 * subsets
				g := newRNG(uint64(k))
				counts := subsetCounts(t, trials, k, m, func(dst []int64) { choose(dst, m, g) })
				require.Len(t, counts, subsets)
				stat := chiSquare(counts, float64(trials)/float64(subsets))
				t.Logf("chi-square %.2f", stat)
				require.Less(t, stat, crit[k], "chi-square over %d subsets (p=0.001)", subsets)
			})
		}
	}
	t.Run("biased control", func(t *testing.T) {
		t.Parallel()
		// Linear probing (take a random position, or the next free one
		// after it, wrapping around) gives distinct sorted cuts too, but
		// favours positions right after taken ones.
		const k = 3
		g := newRNG(9)
		trials := 4000 * binomial(m, k)
		counts := subsetCounts(t, trials, k, m, func(dst []int64) {
			var set uint64 // bit v for position v
			for range k {
				v := 1 + g.below(m)
				for set&(1<<v) != 0 {
					v = v%m + 1
				}
				set |= 1 << v
			}
			i := 0
			for v := uint64(1); v <= m; v++ {
				if set&(1<<v) != 0 {
					dst[i] = int64(v)
					i++
				}
			}
		})
		stat := chiSquare(counts, float64(trials)/float64(len(counts)))
		t.Logf("linear probing: chi-square %.2f", stat)
		require.Greater(t, stat, chi2Crit19)
	})
}

// subsetCounts runs choose trials times, checks each result is k strictly
// increasing positions in 1..m, and counts each subset (keyed as a bitmask).
func subsetCounts(t *testing.T, trials, k, m int, choose func([]int64)) []int {
	t.Helper()
	byMask := map[uint64]int{}
	dst := make([]int64, k)
	for range trials {
		choose(dst)
		var mask uint64
		for i, v := range dst {
			if v < 1 || v > int64(m) || (i > 0 && v <= dst[i-1]) {
				require.Failf(t, "bad cuts", "%v is not increasing within 1..%d", dst, m)
			}
			mask |= 1 << v
		}
		require.Equal(t, k, bits.OnesCount64(mask))
		byMask[mask]++
	}
	counts := make([]int, 0, len(byMask))
	for _, c := range byMask {
		counts = append(counts, c)
	}
	return counts
}

func binomial(n, k int) int {
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
	}
	return r
}
