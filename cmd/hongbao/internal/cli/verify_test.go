package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/fairness"
)

// TestVerifyProofTreeSize: a proof is held to the committed count. An
// operator who hashes one packet more than the commitment states (an
// insider's) publishes a root whose proofs are all valid paths, in a tree
// of count+1: verify proof refuses them with the commitment or with
// --root and --size, and takes them only with the size they were made
// for. --root without --size is bad input.
func TestVerifyProofTreeSize(t *testing.T) {
	t.Parallel()
	const id, count = "fair-size", 6
	cents := []int64{10, 20, 30, 40, 50, 60, 999} // the last one not committed
	salts := make([]byte, fairness.SaltSize*len(cents))
	for i := range salts {
		salts[i] = byte(i)
	}
	tree, err := fairness.NewTree(id, cents, salts)
	require.NoError(t, err)
	p, err := fairness.NewProof(id, tree, 2, 20, salts[fairness.SaltSize:2*fairness.SaltSize])
	require.NoError(t, err)
	require.NoError(t, fairness.VerifyProof(p, tree.Root()), "a valid path to the root")
	require.EqualValues(t, count+1, p.TreeSize)

	dir := t.TempDir()
	proof := writeJSON(t, dir, "proof.json", p)
	root := tree.Root().String()
	cm := fairness.Commitment{CampaignID: id, Scheme: fairness.Scheme, Root: root, Count: count, TotalCents: 210}
	commitment := writeJSON(t, dir, "commitment.json", cm)

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"--size of the commitment", []string{"--root", root, "--size", strconv.Itoa(count)}, 1},
		{"the commitment's count", []string{"--commitment", commitment}, 1},
		{"--size the proof was made for", []string{"--root", root, "--size", strconv.Itoa(count + 1)}, 0},
		{"--root without --size", []string{"--root", root}, 2},
		{"--size with --commitment", []string{"--commitment", commitment, "--size", "6"}, 2},
		{"--size 0", []string{"--root", root, "--size", "0"}, 2},
	} {
		code, out, errs := run(t, nil, append(append([]string{"verify", "proof"}, tc.args...), proof)...)
		require.Equal(t, tc.code, code, "%s: %s %s", tc.name, out, errs)
		if tc.code == 1 {
			require.Contains(t, errs, "tree of 7 packets, the commitment has 6", tc.name)
		}
	}
}

// TestVerifyProofShiftedLeaf: a proof whose path is valid but puts the
// packet at another leaf than seq-1 (a tree whose leaves are not in seq
// order) does not hold.
func TestVerifyProofShiftedLeaf(t *testing.T) {
	t.Parallel()
	const id = "fair-shift"
	salt := func(k byte) []byte {
		s := make([]byte, fairness.SaltSize)
		s[0] = k
		return s
	}
	leaf := func(seq int64, cents int64) fairness.Hash {
		return fairness.LeafHash(fairness.Leaf(id, seq, cents, salt(byte(seq))))
	}
	// Leaves in the order seq 2, 1, 3, 4: packet 1 sits at index 1.
	l2, l1, l3, l4 := leaf(2, 20), leaf(1, 10), leaf(3, 30), leaf(4, 40)
	root := fairness.NodeHash(fairness.NodeHash(l2, l1), fairness.NodeHash(l3, l4))
	p := fairness.Proof{PacketID: id + "/1", Seq: 1, Cents: 10, Salt: fairness.Hash(salt(1)).String(),
		LeafIndex: 1, TreeSize: 4, Path: []string{l2.String(), fairness.NodeHash(l3, l4).String()}, Root: root.String()}
	got, err := fairness.RootFromPath(1, 4, l1, []fairness.Hash{l2, fairness.NodeHash(l3, l4)})
	require.NoError(t, err)
	require.Equal(t, root, got, "the path itself is valid")

	dir := t.TempDir()
	proof := writeJSON(t, dir, "shifted.json", p)
	code, out, errs := run(t, nil, "verify", "proof", "--root", root.String(), "--size", "4", proof)
	require.Equal(t, 1, code, "%s %s", out, errs)
	require.Contains(t, errs, "leaf_index 1 is not seq-1 (0)")
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}
