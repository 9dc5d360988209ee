package split

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Discount amounts. A discount campaign spends a budget over a quota of
// discounts, and the amounts are drawn ahead of time in three lists, as in
// the card schemes' published design, here in integer cents:
//
//  1. Pairs. The range of list 1 is cut into ten bands of width w. For band
//     k (0..9) a pair is (lo + k*w + a, lo + (k+1)*w - a) with a drawn
//     uniformly in [0, w]: both amounts lie in band k and the pair sums to
//     2*lo + (2k+1)*w whatever a is. A group of ten pairs, one per band,
//     sums to exactly 20*(lo + 5*w): amounts spread evenly over the whole
//     range, yet the sum is known in advance to the cent. (The published
//     design draws one A per group of twenty; a fresh a per pair keeps the
//     same exactness with more variety.) The range [lo, lo + 10*w] is
//     centred on q, the average left after the tail (rounded down), as wide
//     as [Min, Max] allows around it, so list 1's mean is the campaign's
//     mean and list 3 only takes up what the rounding left.
//  2. Tail: amounts of exactly Min. They are served last on every shard
//     (see Deal), so the last discounts are small: a user close to the
//     amount limit is clipped by little, and each tail amount can take up
//     to Max - Min of compensation (what clipping set aside) before the
//     campaign ends, so the leftover is small. The published design uses
//     1-unit amounts; amounts of Min keep the promise that every amount is
//     within [Min, Max] (with Min at its default, 1 cent, they are the
//     published tail). There are at most Quota/10 of them, summing to at
//     most Budget/3000, and never so many that the rest could not be
//     spent within Max.
//  3. Rest: whatever list 1 leaves of the quota and the budget (the
//     groups that do not fill twenty, the remainder of the average),
//     drawn by DoubleAverage within [Min, Max].
//
// Every list is integers; the three together hold exactly Quota amounts
// summing exactly to Budget, each within [Min, Max].

// DiscountSpec describes the amounts of a discount campaign. Amounts are
// cents.
type DiscountSpec struct {
	// Budget is the amount to spend, exactly: at least 1 cent, at most
	// MaxTotal.
	Budget int64
	// Quota is the number of discounts, 1..MaxCount.
	Quota int
	// Min is the smallest discount; 0 means 1 cent.
	Min int64
	// Max is the largest discount; 0 means the budget.
	Max int64
}

// Normalize returns the spec with its defaults (Min 1, Max Budget) after
// checking that the budget can be spent exactly in Quota amounts within
// [Min, Max]. Its error is a *SpecError naming "budget", "quota", "min"
// or "max"; products are checked by division, never computed.
func (s DiscountSpec) Normalize() (DiscountSpec, error) {
	if err := checkBounds("quota", s.Quota, "budget", s.Budget, s.Min, s.Max); err != nil {
		return DiscountSpec{}, err
	}
	if s.Min == 0 {
		s.Min = 1
	}
	if s.Max == 0 {
		s.Max = s.Budget
	}
	n := int64(s.Quota)
	switch {
	case s.Max > s.Budget:
		return DiscountSpec{}, specErr("max", "%s is above the budget of %s", cents(s.Max), cents(s.Budget))
	case s.Min > s.Max:
		return DiscountSpec{}, specErr("min", "%s is above max %s", cents(s.Min), cents(s.Max))
	case s.Min > s.Budget/n:
		// quota*min > budget, without the product.
		return DiscountSpec{}, specErr("min", "%d discounts of at least %s cost more than the budget of %s",
			s.Quota, cents(s.Min), cents(s.Budget))
	case s.Max < (s.Budget+n-1)/n:
		// quota*max < budget: the budget could not be spent.
		return DiscountSpec{}, specErr("max", "%d discounts of at most %s cannot spend the budget of %s",
			s.Quota, cents(s.Max), cents(s.Budget))
	}
	return s, nil
}

// DiscountLists are the three lists of a discount campaign's amounts.
type DiscountLists struct {
	// Pairs is list 1, in construction order: groups of ten pairs, band 0
	// to 9, each pair (low, high).
	Pairs []int64
	// Tail is list 2: amounts of Min.
	Tail []int64
	// Rest is list 3.
	Rest []int64
	// Low and Band describe list 1's range: band k is [Low + k*Band,
	// Low + (k+1)*Band]. Band is 0 when there is no list 1.
	Low, Band int64
}

// All returns the amounts of the three lists, list 1, then 3, then 2.
func (l DiscountLists) All() []int64 {
	out := make([]int64, 0, len(l.Pairs)+len(l.Rest)+len(l.Tail))
	out = append(append(append(out, l.Pairs...), l.Rest...), l.Tail...)
	return out
}

// tailLimit is the published bound on the tail's sum: Budget/3000.
const tailLimit = 3000

// Discounts draws the three lists of s. It is a pure function of (s,
// seed); the seed is an operator secret, as for Split. Errors are
// *SpecError and match ErrInvalidSpec.
func Discounts(s DiscountSpec, seed uint64) (DiscountLists, error) {
	s, err := s.Normalize()
	if err != nil {
		return DiscountLists{}, err
	}
	g := newDomainRNG(discountDomain, seed)
	var l DiscountLists
	tail := tailCount(s)
	budget, quota := s.Budget-tail*s.Min, int64(s.Quota)-tail
	l.Tail = make([]int64, tail)
	for i := range l.Tail {
		l.Tail[i] = s.Min
	}
	q, r := budget/quota, budget%quota
	w := min(q-s.Min, s.Max-q) / 5
	groups := int64(0)
	if w > 0 {
		restMin := int64(0) // the fewest list 3 amounts that can hold the remainder
		if r > 0 {
			restMin = (r + s.Max - q - 1) / (s.Max - q)
		}
		groups = (quota - restMin) / 20
	}
	if groups > 0 {
		l.Low, l.Band = q-5*w, w
		l.Pairs = drawPairs(l.Low, w, groups, g)
	}
	restCount := quota - 20*groups
	if restCount > 0 {
		rest := Spec{Total: budget - 20*groups*q, Count: int(restCount), Min: s.Min, Max: s.Max}
		l.Rest = make([]int64, restCount)
		drawDoubleAverage(rest, g, l.Rest)
	}
	return l, nil
}

// discountDomain and dealDomain key the streams of Discounts and Deal,
// apart from each other and from Split's: the same seed never draws
// related numbers in two places.
const (
	discountDomain = "hongbao/split/discount/v1"
	dealDomain     = "hongbao/split/discount-deal/v1"
)

// newDomainRNG is newRNG under another domain string.
func newDomainRNG(domain string, seed uint64) *rng {
	buf := make([]byte, len(domain)+8)
	copy(buf, domain)
	binary.BigEndian.PutUint64(buf[len(domain):], seed)
	return &rng{src: rand.NewChaCha8(sha256.Sum256(buf))}
}

// drawPairs draws groups groups of ten pairs over the bands of width w
// starting at lo.
func drawPairs(lo, w, groups int64, g *rng) []int64 {
	out := make([]int64, 0, 20*groups)
	for range groups {
		for k := range int64(10) {
			a := g.int64n(w + 1)
			out = append(out, lo+k*w+a, lo+(k+1)*w-a)
		}
	}
	return out
}

// tailCount is the size of list 2: at most Quota/10 amounts, summing to
// at most Budget/3000, and only as many as leave the rest of the budget
// spendable within Max (monotone in the count, so found by bisection).
func tailCount(s DiscountSpec) int64 {
	n := int64(s.Quota)
	hi := min(n/10, s.Budget/tailLimit/s.Min)
	feasible := func(t int64) bool {
		left, count := s.Budget-t*s.Min, n-t
		// count*Max >= left, without the product.
		return s.Max >= (left+count-1)/count
	}
	lo := int64(0)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if feasible(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Deal deals the amounts to shards queues, in the order each shard serves
// them: amount i of All() goes to shard i mod shards, so every shard gets
// the same count give or take one (the first ones one more) and 1/shards
// of each list; then each shard's share of lists 1 and 3 is shuffled, and
// its share of the tail stays last. It is a pure function of (l, shards,
// seed); shards must be at least 1.
func (l DiscountLists) Deal(shards int, seed uint64) [][]int64 {
	if shards < 1 {
		panic(fmt.Sprintf("split: Deal into %d shards", shards))
	}
	all := l.All()
	body := len(all) - len(l.Tail)
	out := make([][]int64, shards)
	bodies := make([]int, shards) // how many of each queue are lists 1 and 3
	for k := range out {
		out[k] = make([]int64, 0, (len(all)+shards-1)/shards)
	}
	for i, a := range all {
		out[i%shards] = append(out[i%shards], a)
		if i < body {
			bodies[i%shards]++
		}
	}
	g := newDomainRNG(dealDomain, seed)
	for k := range out {
		shuffle(out[k][:bodies[k]], g)
	}
	return out
}
