package ledgertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// testBlocks: blocks need the packets first, round-trip with their
// packets (runs of any step, unsorted input), a replay is a no-op, the
// same id with other packets is a conflict, and invalid blocks are
// refused.
func testBlocks(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cents := make([]int64, 40)
	for i := range cents {
		cents[i] = int64(i + 1)
	}
	b1 := ledger.Block{ID: "a1", Shard: 0, Seqs: []int64{3, 6, 9, 12, 1, 2, 40}}
	require.ErrorIs(t, l.OpenBlock(ctx, "c", b1), ledger.ErrNoPackets)
	require.NoError(t, l.WritePackets(ctx, "c", cents))
	require.NoError(t, l.OpenBlock(ctx, "c", b1))
	require.NoError(t, l.OpenBlock(ctx, "c", b1), "a replay")
	b2 := ledger.Block{ID: "b2", Shard: 2, Seqs: []int64{20, 21, 22, 23}}
	require.NoError(t, open(t).OpenBlock(ctx, "c", b2), "another ledger on the same database")

	other := b1
	other.Seqs = []int64{4}
	require.ErrorIs(t, l.OpenBlock(ctx, "c", other), ledger.ErrConflict)
	for _, bad := range []ledger.Block{{ID: "", Seqs: []int64{1}}, {ID: "x"}, {ID: "x", Seqs: []int64{0}},
		{ID: "x", Seqs: []int64{41}}, {ID: "x", Shard: -1, Seqs: []int64{1}}} {
		require.ErrorIs(t, l.OpenBlock(ctx, "c", bad), ledger.ErrInvalid, "%+v", bad)
	}

	var got []ledger.Block
	require.NoError(t, l.Blocks(ctx, "c", func(b ledger.Block) error { got = append(got, b); return nil }))
	require.Equal(t, []ledger.Block{
		{ID: "a1", Shard: 0, Seqs: []int64{1, 2, 3, 6, 9, 12, 40}},
		{ID: "b2", Shard: 2, Seqs: []int64{20, 21, 22, 23}},
	}, got)
	got = nil
	require.NoError(t, l.Blocks(ctx, "other", func(b ledger.Block) error { got = append(got, b); return nil }))
	require.Empty(t, got)
}
