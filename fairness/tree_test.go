package fairness_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/hongbao/hongbao/fairness"
)

// tlogTree builds the tree of leaves with golang.org/x/mod/sumdb/tlog,
// the Go checksum database's implementation of RFC 6962's hashing, which
// RFC 9162 keeps.
func tlogTree(t *testing.T, leaves [][]byte) tlog.HashReaderFunc {
	t.Helper()
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for n, leaf := range leaves {
		hs, err := tlog.StoredHashes(int64(n), leaf, r)
		require.NoError(t, err)
		stored = append(stored, hs...)
	}
	return r
}

func packets(t *testing.T, n int) ([]int64, []byte) {
	t.Helper()
	cents := make([]int64, n)
	for i := range cents {
		v, err := rand.Int(rand.Reader, big.NewInt(5000))
		require.NoError(t, err)
		cents[i] = v.Int64() + 1
	}
	salts := make([]byte, fairness.SaltSize*n)
	_, _ = rand.Read(salts)
	return cents, salts
}

func TestTreeAgreesWithTlog(t *testing.T) {
	t.Parallel()
	sizes := []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64, 100, 1000}
	for _, n := range sizes {
		cents, salts := packets(t, n)
		leaves := make([][]byte, n)
		for i := range leaves {
			leaves[i] = fairness.Leaf("c1", int64(i+1), cents[i], salts[32*i:32*i+32])
		}
		r := tlogTree(t, leaves)
		want, err := tlog.TreeHash(int64(n), r)
		require.NoError(t, err)
		root, err := fairness.Root("c1", cents, salts)
		require.NoError(t, err)
		require.Equal(t, fairness.Hash(want), root, "size %d", n)
		tree, err := fairness.NewTree("c1", cents, salts)
		require.NoError(t, err)
		require.Equal(t, root, tree.Root())
		for i := range int64(n) {
			path, err := tree.Path(i)
			require.NoError(t, err)
			proof := make(tlog.RecordProof, len(path))
			for j, p := range path {
				proof[j] = tlog.Hash(p)
			}
			leaf := tlog.RecordHash(leaves[i])
			require.NoError(t, tlog.CheckRecord(proof, int64(n), want, i, leaf), "size %d leaf %d", n, i)
			theirs, err := tlog.ProveRecord(int64(n), i, r)
			require.NoError(t, err)
			require.Equal(t, proof, theirs)
			got, err := fairness.RootFromPath(i, int64(n), fairness.Hash(leaf), path)
			require.NoError(t, err)
			require.Equal(t, root, got)
		}
	}
}

func TestRootBeyondOneChunk(t *testing.T) {
	t.Parallel()
	n := 3*(1<<14) + 5
	cents, salts := packets(t, n)
	tree, err := fairness.NewTree("big", cents, salts)
	require.NoError(t, err)
	root, err := fairness.Root("big", cents, salts)
	require.NoError(t, err)
	require.Equal(t, tree.Root(), root)
}

func TestPathRejectsTampering(t *testing.T) {
	t.Parallel()
	cents, salts := packets(t, 11)
	tree, err := fairness.NewTree("c", cents, salts)
	require.NoError(t, err)
	path, err := tree.Path(4)
	require.NoError(t, err)
	leaf := fairness.LeafHash(fairness.Leaf("c", 5, cents[4], salts[4*32:5*32]))
	other := fairness.LeafHash(fairness.Leaf("c", 5, cents[4]+1, salts[4*32:5*32]))
	got, err := fairness.RootFromPath(4, 11, other, path)
	require.NoError(t, err)
	require.NotEqual(t, tree.Root(), got)
	_, err = fairness.RootFromPath(4, 11, leaf, path[:len(path)-1])
	require.Error(t, err)
	_, err = fairness.RootFromPath(4, 11, leaf, append(path, path[0]))
	require.Error(t, err)
	got, err = fairness.RootFromPath(4, 11, leaf, path)
	require.NoError(t, err)
	require.Equal(t, tree.Root(), got)
}

func TestLeafBytes(t *testing.T) {
	t.Parallel()
	salt := make([]byte, 32)
	salt[31] = 0xab
	leaf := fairness.Leaf("rain-1", 7, 1234, salt)
	require.Equal(t, "hongbao-packet-v1:rain-1:7:1234:"+hex.EncodeToString(salt), string(leaf))
	want := sha256.Sum256(append([]byte{0}, leaf...))
	require.Equal(t, fairness.Hash(want), fairness.LeafHash(leaf))
}

// TestWorkedExample holds docs/fairness.md's worked example: three
// packets of campaign demo-1 and the root they hash to.
func TestWorkedExample(t *testing.T) {
	t.Parallel()
	salts := append(append(bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)...), bytes.Repeat([]byte{0x33}, 32)...)
	cents := []int64{120, 250, 130}
	root, err := fairness.Root("demo-1", cents, salts)
	require.NoError(t, err)
	require.Equal(t, "98fa2952de2f4631237d5a6c0695b54ae25f2c72bde1b9bebb6e659715344380", root.String())
	tree, err := fairness.NewTree("demo-1", cents, salts)
	require.NoError(t, err)
	path, err := tree.Path(1)
	require.NoError(t, err)
	require.Equal(t, "6d6717f9a20ac2218daa2f20b0544a0ce21b661a548574454d9bf9f3b774ff09", path[0].String())
	require.Equal(t, "a5fdb7a6cf94da40951944a8afdee10f9a5175b637bf43631223c3849ffe5830", path[1].String())
	doc, err := os.ReadFile("../docs/fairness.md")
	require.NoError(t, err)
	for _, h := range []string{root.String(), path[0].String(), path[1].String()} {
		require.Contains(t, string(doc), h, "docs/fairness.md shows the example's hashes")
	}
}
