package fairness_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/fairness"
)

func TestHistogram(t *testing.T) {
	t.Parallel()
	require.Equal(t, []fairness.Bucket{{MinCents: 1, MaxCents: 1, Count: 2}, {MinCents: 2, MaxCents: 2, Count: 0}, {MinCents: 3, MaxCents: 3, Count: 1}},
		fairness.Histogram([]int64{1, 3, 1}))
	h := fairness.Histogram([]int64{1, 100, 50, 41})
	require.Len(t, h, 20)
	var n int64
	for _, b := range h {
		n += b.Count
	}
	require.EqualValues(t, 4, n)
	require.EqualValues(t, 1, h[0].MinCents)
	require.EqualValues(t, 100, h[len(h)-1].MaxCents)
}

func drawLog(t *testing.T, cents []int64, salts []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, c := range cents {
		line := fairness.DrawLine{Seq: int64(i + 1), Cents: c, Salt: hex.EncodeToString(salts[32*i : 32*i+32])}
		if i%2 == 0 {
			h := fairness.Pseudonym([]byte("k"), fmt.Sprint("u", i))
			now := time.Now().UTC()
			line.Holder, line.GrantedAt = &h, &now
		}
		b, err := json.Marshal(line)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	return buf.Bytes()
}

func TestProofAndDrawLog(t *testing.T) {
	t.Parallel()
	cents, salts := packets(t, 37)
	c, err := fairness.Commit("rain", cents, salts, 1, 5000, time.Now())
	require.NoError(t, err)
	root, err := fairness.ParseHash(c.Root)
	require.NoError(t, err)
	tree, err := fairness.NewTree("rain", cents, salts)
	require.NoError(t, err)
	for seq := int64(1); seq <= 37; seq++ {
		p, err := fairness.NewProof("rain", tree, seq, cents[seq-1], salts[32*(seq-1):32*seq])
		require.NoError(t, err)
		require.NoError(t, fairness.VerifyProof(p, root))
		bad := p
		bad.Cents++
		require.ErrorIs(t, fairness.VerifyProof(bad, root), fairness.ErrMismatch)
	}
	log := drawLog(t, cents, salts)
	res, err := fairness.VerifyDrawLog(bytes.NewReader(log), c)
	require.NoError(t, err)
	require.EqualValues(t, 37, res.Count)
	require.EqualValues(t, 19, res.Granted)

	// One cent moved between two packets keeps the total, not the root.
	moved := append([]int64(nil), cents...)
	moved[3]--
	moved[4]++
	_, err = fairness.VerifyDrawLog(bytes.NewReader(drawLog(t, moved, salts)), c)
	require.ErrorIs(t, err, fairness.ErrMismatch)
	// Two salts swapped.
	swapped := append([]byte(nil), salts...)
	copy(swapped[0:32], salts[32:64])
	copy(swapped[32:64], salts[0:32])
	_, err = fairness.VerifyDrawLog(bytes.NewReader(drawLog(t, cents, swapped)), c)
	require.ErrorIs(t, err, fairness.ErrMismatch)
	_, err = fairness.VerifyDrawLog(bytes.NewReader([]byte("{not json\n")), c)
	require.ErrorIs(t, err, fairness.ErrBadInput)
}

// BenchmarkCommitMillion: what a create of 1,000,000 packets adds for its
// commitment, before the ledger write: the salts from crypto/rand, the
// leaves hashed and the tree folded to its root, the histogram.
func BenchmarkCommitMillion(b *testing.B) {
	cents := make([]int64, 1_000_000)
	for i := range cents {
		cents[i] = int64(i%200 + 1)
	}
	for b.Loop() {
		salts, err := fairness.NewSalts(len(cents))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fairness.Commit("rain-2026", cents, salts, 1, 200, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
