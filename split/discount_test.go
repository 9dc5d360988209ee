package split

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireDiscounts checks every promise of Discounts for the normalized
// spec s: Quota amounts summing to Budget, each within [Min, Max]; a tail
// of Min amounts within its bounds; list 1 made of whole groups of ten
// pairs, each pair within its band and summing to the band's constant.
func requireDiscounts(t testing.TB, s DiscountSpec, l DiscountLists) {
	t.Helper()
	all := l.All()
	require.Len(t, all, s.Quota, "spec %+v", s)
	var sum int64
	for i, a := range all {
		if a < s.Min || a > s.Max {
			require.Failf(t, "amount out of bounds", "amount %d = %d, spec %+v", i, a, s)
		}
		sum += a
	}
	require.Equal(t, s.Budget, sum, "spec %+v", s)
	var tailSum int64
	for _, a := range l.Tail {
		require.Equal(t, s.Min, a, "the tail holds amounts of Min")
		tailSum += a
	}
	require.LessOrEqual(t, len(l.Tail), s.Quota/10, "spec %+v", s)
	require.LessOrEqual(t, tailSum, s.Budget/tailLimit, "spec %+v", s)
	require.Zero(t, len(l.Pairs)%20, "list 1 is whole groups of twenty")
	if len(l.Pairs) > 0 {
		require.Positive(t, l.Band)
	}
	for p := 0; p < len(l.Pairs); p += 2 {
		k := int64(p/2) % 10
		lo, hi := l.Low+k*l.Band, l.Low+(k+1)*l.Band
		x, y := l.Pairs[p], l.Pairs[p+1]
		require.True(t, x >= lo && x <= hi && y >= lo && y <= hi, "pair %d (%d, %d) outside band [%d, %d]", p/2, x, y, lo, hi)
		require.Equal(t, 2*l.Low+(2*k+1)*l.Band, x+y, "pair %d", p/2)
	}
}

// randomDiscountSpec draws a valid spec: everyday campaigns, tight ones
// (the budget at quota*min or quota*max), narrow and wide ranges.
func randomDiscountSpec(r *rand.Rand) DiscountSpec {
	s := DiscountSpec{Quota: 1 + r.IntN(3000), Min: 1 + r.Int64N(100)}
	n := int64(s.Quota)
	switch r.IntN(5) {
	case 0: // no max: the budget
		s.Budget = n*s.Min + r.Int64N(n*1000+1)
	case 1: // tight against min
		s.Budget = n * s.Min
		s.Max = s.Min + r.Int64N(3)
	case 2: // tight against max
		s.Max = s.Min + r.Int64N(2000)
		s.Budget = n * s.Max
	default: // everyday, with a max
		s.Max = s.Min + r.Int64N(5000)
		s.Budget = n*s.Min + r.Int64N(n*(s.Max-s.Min)+1)
	}
	if s.Max > s.Budget {
		s.Max = s.Budget
	}
	return s
}

func TestDiscountsProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 0xd15c))
	for range 1000 {
		s := randomDiscountSpec(r)
		norm, err := s.Normalize()
		require.NoError(t, err, "spec %+v", s)
		seed := r.Uint64()
		l, err := Discounts(s, seed)
		require.NoError(t, err)
		requireDiscounts(t, norm, l)
		again, err := Discounts(s, seed)
		require.NoError(t, err)
		require.Equal(t, l, again, "a pure function of spec and seed")
		shards := 1 + r.IntN(8)
		requireDeal(t, l, shards, l.Deal(shards, seed))
	}
}

// requireDeal checks the queues Deal made: the round-robin counts, the
// same amounts as the lists, every shard's tail share last and its body a
// permutation of its share of lists 1 and 3.
func requireDeal(t testing.TB, l DiscountLists, shards int, qs [][]int64) {
	t.Helper()
	all := l.All()
	require.Len(t, qs, shards)
	body := len(all) - len(l.Tail)
	for k, q := range qs {
		var want, wantBody []int64
		for i := k; i < len(all); i += shards {
			want = append(want, all[i])
			if i < body {
				wantBody = append(wantBody, all[i])
			}
		}
		require.Len(t, q, len(want), "shard %d", k)
		tail := q[len(wantBody):]
		for _, a := range tail {
			require.Equal(t, l.Tail[0], a, "shard %d: its tail share is last", k)
		}
		got := slices.Clone(q[:len(wantBody)])
		slices.Sort(got)
		slices.Sort(wantBody)
		require.True(t, slices.Equal(wantBody, got), "shard %d: its body is its share of lists 1 and 3", k)
	}
}

func TestDiscountsShape(t *testing.T) {
	t.Parallel()
	// The example: 1000.00 over 800 discounts within [0.01, 5.00].
	s := DiscountSpec{Budget: 100000, Quota: 800, Min: 1, Max: 500}
	l, err := Discounts(s, 1)
	require.NoError(t, err)
	norm, _ := s.Normalize()
	requireDiscounts(t, norm, l)
	require.Len(t, l.Tail, 33, "Budget/3000 = 33 cents of 1-cent amounts")
	require.Len(t, l.Pairs, 760, "38 groups of twenty: all the quota but the remainder")
	// list 1 is centred on the average left after the tail: 99967/767 = 130.
	require.Equal(t, int64(130), l.Low+5*l.Band)
	require.Equal(t, int64(5), l.Low)
	require.Equal(t, int64(25), l.Band)

	// A wide range around the average: list 1 reaches from near min to
	// about twice the average left after the tail (999800/1800 = 555).
	l, err = Discounts(DiscountSpec{Budget: 1000000, Quota: 2000, Min: 1, Max: 100000}, 2)
	require.NoError(t, err)
	require.Len(t, l.Tail, 200, "Quota/10")
	require.Equal(t, int64(555), l.Low+5*l.Band)
	require.Equal(t, int64(5), l.Low)

	// No room around the average: everything is list 3 (and the tail).
	l, err = Discounts(DiscountSpec{Budget: 1000, Quota: 100, Min: 10, Max: 10}, 3)
	require.NoError(t, err)
	require.Empty(t, l.Pairs)
	require.Empty(t, l.Tail, "a tail of 10-cent amounts would exceed Budget/3000")
	require.Len(t, l.Rest, 100)
}

func TestDiscountsGolden(t *testing.T) {
	t.Parallel()
	l, err := Discounts(DiscountSpec{Budget: 10000, Quota: 25, Min: 1, Max: 1000}, 42)
	require.NoError(t, err)
	require.Equal(t, int64(10000), sum(l.All()))
	// Pinned: a change of how the lists are drawn needs a new domain.
	require.Equal(t, fmt.Sprint(goldenDiscounts), fmt.Sprint(l.All()))
	q := l.Deal(2, 42)
	require.Equal(t, fmt.Sprint(goldenDeal), fmt.Sprint(q))
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func TestDiscountSpecNormalize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec  DiscountSpec
		field string
	}{
		{DiscountSpec{Budget: 100, Quota: 0}, "quota"},
		{DiscountSpec{Budget: 100, Quota: MaxCount + 1}, "quota"},
		{DiscountSpec{Budget: 0, Quota: 1}, "budget"},
		{DiscountSpec{Budget: MaxTotal + 1, Quota: 1}, "budget"},
		{DiscountSpec{Budget: 100, Quota: 1, Min: -1}, "min"},
		{DiscountSpec{Budget: 100, Quota: 1, Max: -1}, "max"},
		{DiscountSpec{Budget: 100, Quota: 1, Max: 101}, "max"},
		{DiscountSpec{Budget: 100, Quota: 1, Min: 60, Max: 50}, "min"},
		{DiscountSpec{Budget: 100, Quota: 3, Min: 34}, "min"},
		{DiscountSpec{Budget: 100, Quota: 3, Max: 33}, "max"},
	} {
		_, err := c.spec.Normalize()
		var se *SpecError
		require.ErrorAs(t, err, &se, "%+v", c.spec)
		require.Equal(t, c.field, se.Field, "%+v: %v", c.spec, err)
		require.ErrorIs(t, err, ErrInvalidSpec)
	}
	s, err := DiscountSpec{Budget: 100, Quota: 3}.Normalize()
	require.NoError(t, err)
	require.Equal(t, DiscountSpec{Budget: 100, Quota: 3, Min: 1, Max: 100}, s)
}

// FuzzDiscounts: any spec is refused with ErrInvalidSpec or yields valid
// lists and a valid deal; nothing panics.
func FuzzDiscounts(f *testing.F) {
	f.Add(int64(100000), 800, int64(1), int64(500), uint64(1), uint8(4))
	f.Add(int64(1000), 100, int64(10), int64(10), uint64(2), uint8(1))
	f.Add(MaxTotal, 4999, int64(7), MaxTotal, uint64(3), uint8(7))
	f.Add(int64(5), 5, int64(0), int64(0), uint64(4), uint8(0))
	f.Add(int64(-1), -1, int64(-1), int64(-1), uint64(5), uint8(255))
	f.Fuzz(func(t *testing.T, budget int64, quota int, mn, mx int64, seed uint64, shards uint8) {
		quota %= 5000
		s := DiscountSpec{Budget: budget, Quota: quota, Min: mn, Max: mx}
		l, err := Discounts(s, seed)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidSpec)
			return
		}
		norm, err := s.Normalize()
		require.NoError(t, err)
		requireDiscounts(t, norm, l)
		n := 1 + int(shards)%16
		requireDeal(t, l, n, l.Deal(n, seed))
	})
}

var (
	goldenDiscounts = []int64{5, 89, 116, 150, 259, 179, 265, 345, 427, 355, 438, 516, 591, 535, 684, 614, 738, 732, 825, 817, 551, 307, 460, 1, 1}
	goldenDeal      = [][]int64{
		{684, 427, 825, 551, 438, 460, 5, 591, 116, 259, 265, 738, 1},
		{150, 307, 179, 516, 355, 535, 345, 89, 732, 614, 817, 1},
	}
)
