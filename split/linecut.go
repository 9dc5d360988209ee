package split

import (
	"math/bits"
	"slices"
)

// denseFactor decides how cut points are chosen. When the line has at most
// denseFactor positions per cut, a bitmap of the line costs no more memory
// than the cuts themselves (m/8 bytes against 8 bytes a cut) and gives
// sorted output without sorting; on longer lines, drawing and sorting
// cuts is cheaper than a bitmap of the line.
const denseFactor = 64

// drawLineCut reserves min-1 cents for every packet, so T' = total -
// count*(min-1) >= count remains, cuts [0, T'] at count-1 distinct points
// among 1..T'-1, and gives each packet one segment (at least 1 cent) plus
// its reserve. Distinct cuts are what guarantee every packet reaches min.
func drawLineCut(s Spec, g *rng, out []int64) {
	n := int64(len(out))
	if s.Max > 0 && s.Total%n == 0 && s.Total/n == s.Max {
		// Only one split exists: every packet at Max. Drawing cuts only for
		// the repair to undo them would waste the time.
		for i := range out {
			out[i] = s.Max
		}
		return
	}
	base := s.Min - 1
	line := s.Total - n*base // n*base < n*min <= total: no overflow
	k := len(out) - 1

	// The cuts go straight into out and become segment lengths in place,
	// from the end so each difference reads an unmodified predecessor.
	chooseCuts(out[:k], uint64(line-1), g)
	prev := int64(0)
	if k > 0 {
		prev = out[k-1]
	}
	out[k] = line - prev
	for i := k - 1; i > 0; i-- {
		out[i] -= out[i-1]
	}
	if base > 0 {
		for i := range out {
			out[i] += base
		}
	}
	if s.Max > 0 {
		repairMax(out, s.Max, g)
	}
}

// chooseCuts fills dst with len(dst) distinct integers from 1..m, in
// increasing order, every such subset equally likely. len(dst) <= m.
func chooseCuts(dst []int64, m uint64, g *rng) {
	if len(dst) == 0 {
		return
	}
	if m <= uint64(len(dst))*denseFactor {
		chooseDense(dst, m, g)
	} else {
		chooseSparse(dst, m, g)
	}
}

// chooseDense marks positions in a bitmap of the line with Floyd's
// algorithm, which needs exactly one draw per chosen position and no
// retries. When more than half the line is to be cut it chooses the
// positions to leave out instead, so it never marks more than m/2.
func chooseDense(dst []int64, m uint64, g *rng) {
	k := uint64(len(dst))
	s, complement := k, false
	if k > m/2 {
		s, complement = m-k, true
	}
	set := make([]uint64, (m+63)/64) // bit v-1 stands for position v
	has := func(v uint64) bool { return set[(v-1)/64]&(1<<((v-1)%64)) != 0 }
	mark := func(v uint64) { set[(v-1)/64] |= 1 << ((v - 1) % 64) }
	// Floyd: for j = m-s+1..m, pick t uniform in 1..j; take t, or j if t is
	// already taken. Each s-subset of 1..m comes out with equal probability.
	for j := m - s + 1; j <= m; j++ {
		t := 1 + g.below(j)
		if has(t) {
			mark(j)
		} else {
			mark(t)
		}
	}
	i := 0
	for wi, w := range set {
		if complement {
			w = ^w
			if wi == len(set)-1 && m%64 != 0 {
				w &= 1<<(m%64) - 1 // bits past m are not positions
			}
		}
		for w != 0 {
			dst[i] = int64(wi)*64 + int64(bits.TrailingZeros64(w)) + 1
			i++
			w &= w - 1
		}
	}
}

// chooseSparse draws positions with replacement, sorts, drops duplicates
// and draws again for the shortfall until it has enough. The result is the
// set of the first k distinct values of an i.i.d. uniform sequence, which by
// symmetry is a uniform k-subset. On a line at least denseFactor times
// longer than the number of cuts, duplicates are rare (under 1/128 of the
// draws), so the first round does almost all the work and the later rounds
// merge a few values in linear time.
func chooseSparse(dst []int64, m uint64, g *rng) {
	k := len(dst)
	tmp := make([]int64, k)
	for i := range dst {
		dst[i] = int64(1 + g.below(m))
	}
	bucketSort(dst, m, tmp)
	have := len(slices.Compact(dst))
	for have < k {
		batch := dst[have:]
		for i := range batch {
			batch[i] = int64(1 + g.below(m))
		}
		slices.Sort(batch)
		batch = slices.Compact(batch)
		merged := mergeUnique(tmp[:0], dst[:have], batch)
		have = copy(dst, merged)
	}
}

// bucketSort sorts values drawn uniformly from 1..m faster than sorting
// them in one piece (a third less time for a million cuts, measured): it
// scatters them into about len(xs)/1024 buckets by a monotone map of the
// value, few enough write streams for the CPU's caches to follow, then sorts
// each bucket, small enough to stay in cache. tmp must be as long as xs and
// m must exceed len(xs).
func bucketSort(xs []int64, m uint64, tmp []int64) {
	nb := uint64(len(xs)/1024 + 1)
	// bucket(v) = floor((v-1)*scale/2^64) with scale = floor(2^64*nb/m) is
	// nondecreasing in v and below nb; Div64 cannot overflow as nb < m.
	scale, _ := bits.Div64(nb, 0, m)
	bucket := func(v int64) uint64 {
		hi, _ := bits.Mul64(uint64(v-1), scale)
		return hi
	}
	start := make([]int, nb+1)
	for _, v := range xs {
		start[bucket(v)+1]++
	}
	for b := uint64(1); b <= nb; b++ {
		start[b] += start[b-1]
	}
	next := slices.Clone(start[:nb])
	for _, v := range xs {
		b := bucket(v)
		tmp[next[b]] = v
		next[b]++
	}
	for b := range nb {
		slices.Sort(tmp[start[b]:start[b+1]])
	}
	copy(xs, tmp)
}

// mergeUnique appends the union of two increasing, duplicate-free slices to
// dst, in increasing order.
func mergeUnique(dst, a, b []int64) []int64 {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			dst = append(dst, a[i])
			i++
		case a[i] > b[j]:
			dst = append(dst, b[j])
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

// repairMax brings packets above mx down to mx and hands the excess to
// packets with room, a random chunk at a time, so the repaired amounts stay
// random rather than piling up on the first packets with room. Since
// count*mx >= total, the packets with room can always absorb the excess.
//
// Handing out chunks gets slow when the excess nearly fills all the room:
// packets are then visited again and again with ever smaller chunks, about
// log(room/leftover room) times each. So when the excess is more than half
// the room, it works on the mirror image: every packet with room is filled
// to mx, and the surplus (less than half the room) is taken back in random
// chunks the same way. Either way at most half the room is handed out,
// which takes about 1.4 rounds per packet with room at worst (measured),
// instead of up to ~37 per packet for rooms near 2^53.
//
// The result respects Max exactly but is no longer a uniform composition of
// the total under the Max constraint.
func repairMax(out []int64, mx int64, g *rng) {
	var excess int64
	for i, v := range out {
		if v > mx {
			excess += v - mx
			out[i] = mx
		}
	}
	if excess == 0 {
		return
	}
	slots := 0
	for _, v := range out {
		if v < mx {
			slots++
		}
	}
	idx := make([]int32, 0, slots) // MaxCount fits int32
	space := make([]int64, 0, slots)
	// The room can exceed int64 (count*mx with mx near 2^53); past 4*excess
	// its exact value no longer matters, so the sum stops growing there.
	var room int64
	for i, v := range out {
		if v < mx {
			idx = append(idx, int32(i))
			space = append(space, mx-v)
			if room <= 4*excess {
				room += mx - v
			}
		}
	}
	if surplus := room - excess; surplus < excess {
		// space[j] becomes what can still be taken back from packet j,
		// which is then filled to mx less what was taken.
		spreadChunks(surplus, idx, space, g)
		for j, i := range idx {
			out[i] += space[j]
		}
		return
	}
	// space[j] becomes what packet j can still take.
	spreadChunks(excess, idx, space, g)
	for j, i := range idx {
		out[i] = mx - space[j]
	}
}

// spreadChunks hands amount out over slots in random chunks: each round,
// a random slot with space left gets 1..min(its space, amount still to
// give) cents, so every round gives at least a cent and the loop ends. The
// amount must not exceed the total space. space[j] ends up holding what is
// left in slot j. Full slots are swapped, with their idx entries, behind the
// live ones, so a round costs O(1) and every (idx, space) pair survives.
func spreadChunks(amount int64, idx []int32, space []int64, g *rng) {
	live := len(space) // every slot starts with space: it is a packet below mx
	for amount > 0 {
		j := g.below(uint64(live))
		give := 1 + g.int64n(min(space[j], amount))
		space[j] -= give
		amount -= give
		if space[j] == 0 {
			live--
			idx[j], idx[live] = idx[live], idx[j]
			space[j], space[live] = space[live], space[j]
		}
	}
}
