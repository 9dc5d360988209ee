package split

import (
	"fmt"
	"testing"
)

// BenchmarkSplit measures whole splits, validation and shuffle included, at
// an everyday average of 10 yuan a packet. The extra line-cut cases cover
// its other code paths: the bitmap for dense lines and the Max repair.
func BenchmarkSplit(b *testing.B) {
	cases := []struct {
		name string
		spec func(n int) Spec
	}{
		{string(DoubleAverage), func(n int) Spec { return Spec{Total: int64(n) * 1000, Count: n} }},
		{string(LineCut), func(n int) Spec { return Spec{Total: int64(n) * 1000, Count: n, Algorithm: LineCut} }},
		{string(Fixed), func(n int) Spec { return Spec{Total: int64(n)*1000 + 7, Count: n, Algorithm: Fixed} }},
		{"double-average+max", func(n int) Spec { return Spec{Total: int64(n) * 1000, Count: n, Max: 1500} }},
		{"line-cut+dense", func(n int) Spec { return Spec{Total: int64(n) * 10, Count: n, Algorithm: LineCut} }},
		{"line-cut+max", func(n int) Spec {
			return Spec{Total: int64(n) * 1000, Count: n, Max: 2000, Algorithm: LineCut}
		}},
	}
	for _, c := range cases {
		for _, n := range []int{10_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				s := c.spec(n)
				b.ReportAllocs()
				seed := uint64(0)
				for b.Loop() {
					seed++
					if _, err := Split(s, seed); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
