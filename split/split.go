package split

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// Split validates s, draws its amounts and shuffles them. The result always
// has s.Count amounts summing exactly to s.Total, each within [Min, Max].
// It is a pure function of (s, seed) so a campaign's split can be recomputed
// later; that also makes the seed an operator secret, see the package
// documentation. Errors are *SpecError and match ErrInvalidSpec.
func Split(s Spec, seed uint64) ([]int64, error) {
	s, err := s.Normalize()
	if err != nil {
		return nil, err
	}
	g := newRNG(seed)
	out := draw(s, g)
	shuffle(out, g)
	return out, nil
}

// NewSeed draws a seed from the operating system's CSPRNG, because a
// guessable seed would let anyone recompute a campaign's packets in grab
// order.
func NewSeed() (uint64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("split: new seed: %w", err)
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// draw produces the amounts of a normalized spec in draw order, before the
// shuffle. It is separate from Split so tests can check properties of the
// draw order itself, such as double-average's per-position means.
func draw(s Spec, g *rng) []int64 {
	out := make([]int64, s.Count)
	switch s.Algorithm {
	case LineCut:
		drawLineCut(s, g, out)
	case Fixed:
		drawFixed(s, out)
	default:
		drawDoubleAverage(s, g, out)
	}
	return out
}

// shuffle is Fisher-Yates: every permutation is equally likely, so the
// position at which someone grabs says nothing about the amount they get.
func shuffle(xs []int64, g *rng) {
	for i := len(xs) - 1; i > 0; i-- {
		j := g.below(uint64(i) + 1)
		xs[i], xs[j] = xs[j], xs[i]
	}
}

// drawFixed needs no randomness: the first r packets take the remainder one
// cent each, and the shuffle decides who gets them.
func drawFixed(s Spec, out []int64) {
	n := int64(len(out))
	q, r := s.Total/n, s.Total%n
	for i := range out {
		out[i] = q
		if int64(i) < r {
			out[i]++
		}
	}
}

// spread returns the quotient and remainder of 2*spare/n. The spread of a
// double-average draw above min is q or q+1 cents (q+1 with probability r/n),
// so its expected value is exactly 2*spare/n and the draw's mean is exactly
// min + spare/n, the remaining average.
//
// Such a draw never takes more than its share can afford: with n >= 2,
// q + 1 <= spare whenever r > 0, and q <= spare always. Proof: 2*spare/n <=
// spare for n >= 2, and since spare is an integer, ceil(2*spare/n) <= spare.
// So min + spread <= min + spare = R - (n-1)*min and the other n-1 packets
// can always get their minimum. TestSpreadNeverExceedsSpare checks this.
// 2*spare cannot overflow: spare <= MaxTotal < 2^53.
func spread(spare, n int64) (q, r int64) {
	return 2 * spare / n, 2 * spare % n
}

// drawDoubleAverage draws each packet uniformly on [min, min+U], with U the
// spread above, and lets the last packet take what remains.
//
// The classic algorithm draws on [min, 2*avg]. Its mean is avg + min/2, so
// every draw but the last takes more than its share on average and the last
// packets are systematically small. Drawing on [min, 2*avg - min] keeps each
// draw's mean at exactly the remaining average R/n; by induction the
// expected remaining amount before draw i is total*(count-i)/count, so every
// position, the last included, has mean total/count.
//
// Max breaks this: a draw clamped to Max (or raised so that the remaining
// packets can stay under Max) no longer has the exact mean. Sums and bounds
// stay exact; only the per-position means become approximate.
func drawDoubleAverage(s Spec, g *rng, out []int64) {
	mn, mx := s.Min, s.Max
	rem := s.Total // invariant: (packets left)*mn <= rem <= (packets left)*mx
	last := len(out) - 1
	for i := 0; i < last; i++ {
		n := int64(len(out) - i) // packets left, including this one; n >= 2
		spare := rem - n*mn      // cannot overflow: n*mn <= rem by the invariant
		u, r := spread(spare, n)
		if r > 0 && g.int64n(n) < r {
			u++
		}
		x := mn + g.int64n(u+1)

		// Keep the invariant for the remaining n-1 packets. Without Max the
		// clamp never changes x (see spread); it is a guard, not a step.
		lo, hi := mn, rem-(n-1)*mn
		if mx > 0 {
			hi = min(hi, mx)
			// (n-1)*mx may overflow; when it exceeds rem, the bound is
			// below mn anyway.
			if mx <= rem/(n-1) {
				lo = max(lo, rem-(n-1)*mx)
			}
		}
		x = min(max(x, lo), hi)

		out[i] = x
		rem -= x
	}
	out[last] = rem
}
