package fairness

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// Scheme names the commitment's layout: the leaf bytes and the tree.
const Scheme = "hongbao-merkle-v1"

// LeafPrefix starts every leaf.
const LeafPrefix = "hongbao-packet-v1:"

// SaltSize is the size of a packet's salt in bytes.
const SaltSize = 32

// Hash is a SHA-256 digest: a leaf's, a node's or a root.
type Hash [sha256.Size]byte

// String is the hash in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("fairness: a hash is %d hex digits, not %d", 2*len(h), len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("fairness: hash %q: %w", s, err)
	}
	return h, nil
}

// Leaf returns the leaf bytes of packet seq of campaign: the UTF-8 of
// "hongbao-packet-v1:<campaign>:<seq>:<cents>:<salt hex>".
func Leaf(campaign string, seq, cents int64, salt []byte) []byte {
	return appendLeaf(nil, campaign, seq, cents, salt)
}

func appendLeaf(b []byte, campaign string, seq, cents int64, salt []byte) []byte {
	b = append(b, LeafPrefix...)
	b = append(b, campaign...)
	b = append(b, ':')
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, cents, 10)
	b = append(b, ':')
	return hex.AppendEncode(b, salt)
}

// LeafHash is RFC 9162's hash of a leaf: SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) Hash {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(leaf)
	var out Hash
	h.Sum(out[:0])
	return out
}

// NodeHash is RFC 9162's hash of an interior node: SHA-256(0x01 || left ||
// right).
func NodeHash(left, right Hash) Hash {
	var b [1 + 2*sha256.Size]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+sha256.Size:], right[:])
	return sha256.Sum256(b[:])
}

// packetHash hashes packet seq's leaf into buf's reuse.
func packetHash(buf []byte, campaign string, seq, cents int64, salt []byte) (Hash, []byte) {
	buf = append(buf[:0], 0)
	buf = appendLeaf(buf, campaign, seq, cents, salt)
	return sha256.Sum256(buf), buf
}

// ErrBadInput: packets and salts that cannot make a tree (none, or salts
// not SaltSize bytes a packet).
var ErrBadInput = errors.New("fairness: bad input")

func checkInput(cents []int64, salts []byte) error {
	if len(cents) == 0 {
		return fmt.Errorf("%w: no packets", ErrBadInput)
	}
	if len(salts) != SaltSize*len(cents) {
		return fmt.Errorf("%w: %d bytes of salts for %d packets", ErrBadInput, len(salts), len(cents))
	}
	return nil
}

// chunkLeaves is the size of the subtrees Root hashes in parallel: a
// power of two, so each is a complete subtree of the RFC 9162 tree.
const chunkLeaves = 1 << 14

// Root is the tree head over the packets of campaign: cents[i] and
// salts[32i:32i+32] are packet seq i+1's. It hashes complete subtrees of
// chunkLeaves leaves on every CPU, then the levels above them.
func Root(campaign string, cents []int64, salts []byte) (Hash, error) {
	if err := checkInput(cents, salts); err != nil {
		return Hash{}, err
	}
	chunks := (len(cents) + chunkLeaves - 1) / chunkLeaves
	heads := make([]Hash, chunks)
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var wg sync.WaitGroup
	next := make(chan int, chunks)
	for c := range chunks {
		next <- c
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			level := make([]Hash, chunkLeaves)
			var buf []byte
			for c := range next {
				from, to := c*chunkLeaves, min((c+1)*chunkLeaves, len(cents))
				l := level[:to-from]
				for i := from; i < to; i++ {
					l[i-from], buf = packetHash(buf, campaign, int64(i+1), cents[i], salts[SaltSize*i:SaltSize*(i+1)])
				}
				heads[c] = fold(l)
			}
		}()
	}
	wg.Wait()
	return fold(heads), nil
}

// fold reduces one level of a tree to its head, in place: pairs are
// hashed, an odd node at a level's end is carried up as it is, which is
// RFC 9162's split at the largest power of two below n.
func fold(level []Hash) Hash {
	for len(level) > 1 {
		n := 0
		for i := 0; i+1 < len(level); i += 2 {
			level[n] = NodeHash(level[i], level[i+1])
			n++
		}
		if len(level)%2 == 1 {
			level[n] = level[len(level)-1]
			n++
		}
		level = level[:n]
	}
	return level[0]
}

// Tree holds every level of a campaign's tree, for inclusion proofs: 64
// bytes a packet.
type Tree struct {
	levels [][]Hash // levels[0] the leaf hashes, the last one the root alone
}

// NewTree hashes the whole tree of the packets of campaign (see Root).
func NewTree(campaign string, cents []int64, salts []byte) (*Tree, error) {
	if err := checkInput(cents, salts); err != nil {
		return nil, err
	}
	leaves := make([]Hash, len(cents))
	var buf []byte
	for i := range cents {
		leaves[i], buf = packetHash(buf, campaign, int64(i+1), cents[i], salts[SaltSize*i:SaltSize*(i+1)])
	}
	t := &Tree{levels: [][]Hash{leaves}}
	for level := leaves; len(level) > 1; {
		up := make([]Hash, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			up[i/2] = NodeHash(level[i], level[i+1])
		}
		if len(level)%2 == 1 {
			up[len(up)-1] = level[len(level)-1]
		}
		t.levels = append(t.levels, up)
		level = up
	}
	return t, nil
}

// Size is the number of leaves.
func (t *Tree) Size() int64 { return int64(len(t.levels[0])) }

// Root is the tree head.
func (t *Tree) Root() Hash { return t.levels[len(t.levels)-1][0] }

// Path is the RFC 9162 section 2.1.3 inclusion proof of leaf index: the
// sibling hashes from the leaf's up to the root's children.
func (t *Tree) Path(index int64) ([]Hash, error) {
	if index < 0 || index >= t.Size() {
		return nil, fmt.Errorf("%w: leaf index %d of a tree of %d", ErrBadInput, index, t.Size())
	}
	var path []Hash
	i := int(index)
	for _, level := range t.levels[:len(t.levels)-1] {
		if s := i ^ 1; s < len(level) {
			path = append(path, level[s])
		}
		i >>= 1
	}
	return path, nil
}

// RootFromPath computes the root that leaf hash leaf at index of a tree
// of size leaves and the inclusion path imply, by RFC 9162 section
// 2.1.3.2; an error when the path has the wrong length for them.
func RootFromPath(index, size int64, leaf Hash, path []Hash) (Hash, error) {
	if index < 0 || index >= size {
		return Hash{}, fmt.Errorf("%w: leaf index %d of a tree of %d", ErrBadInput, index, size)
	}
	fn, sn := index, size-1
	r := leaf
	for _, p := range path {
		if sn == 0 {
			return Hash{}, fmt.Errorf("%w: inclusion path longer than the tree", ErrBadInput)
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = NodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return Hash{}, fmt.Errorf("%w: inclusion path shorter than the tree", ErrBadInput)
	}
	return r, nil
}
