package split

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// seedDomain separates this package's use of a seed from any other use of
// the same number, and versions the derivation: changing how splits are
// drawn must come with a new domain so old seeds are never silently
// reinterpreted.
const seedDomain = "hongbao/split/v1"

// rng is the only source of randomness in a split. It reads the ChaCha8
// stream directly and does its own bounded draws instead of going through
// rand.Rand, whose Uint64N takes a different path on 32-bit platforms and is
// not promised to stay the same across Go releases: a split must replay
// identically wherever and whenever it is recomputed.
type rng struct {
	src *rand.ChaCha8
}

func newRNG(seed uint64) *rng {
	var buf [len(seedDomain) + 8]byte
	copy(buf[:], seedDomain)
	binary.BigEndian.PutUint64(buf[len(seedDomain):], seed)
	return &rng{src: rand.NewChaCha8(sha256.Sum256(buf[:]))}
}

// below returns a uniform integer in [0, n); n must be positive. It uses
// Lemire's multiply-and-reject method, which is exactly uniform and usually
// needs a single 64-bit draw.
func (g *rng) below(n uint64) uint64 {
	hi, lo := bits.Mul64(g.src.Uint64(), n)
	if lo < n {
		thresh := -n % n // 2^64 mod n
		for lo < thresh {
			hi, lo = bits.Mul64(g.src.Uint64(), n)
		}
	}
	return hi
}

// int64n is below for the int64 amounts the algorithms work in; n > 0.
func (g *rng) int64n(n int64) int64 {
	return int64(g.below(uint64(n)))
}
