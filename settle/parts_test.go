package settle_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/settle"
)

// TestPartOf: the shards of a campaign fall in consecutive parts (S <= P
// shards in S parts), one part holds everything when there is one, and
// campaigns of one shard spread over the parts rather than all in part 0.
func TestPartOf(t *testing.T) {
	t.Parallel()
	roots := map[int]int{}
	for c := range 400 {
		id := fmt.Sprintf("camp-%d", c)
		require.Zero(t, settle.PartOf(id, 5, 1))
		first := settle.PartOf(id, 0, 16)
		roots[first]++
		seen := map[int]bool{}
		for k := range 16 {
			p := settle.PartOf(id, k, 16)
			require.Equal(t, (first+k)%16, p)
			seen[p] = true
		}
		require.Len(t, seen, 16)
	}
	require.Len(t, roots, 16, "roots of one-shard campaigns in every part")
	for p, n := range roots {
		require.Greater(t, n, 5, "part %d holds the root of %d campaigns of 400", p, n)
	}
}
