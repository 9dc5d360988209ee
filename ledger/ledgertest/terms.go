package ledgertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// termsOf are valid terms for packets cents.
func termsOf(cents []int64) ledger.Terms {
	return ledger.Terms{
		Funding: "ops", Total: sum(cents), Count: int64(len(cents)), Min: 1, Max: 997,
		Split: "double-average", Seed: 1<<63 + 5, Shards: 3, OpensAt: 1_700_000_000_000, ClosesAt: 1_700_000_060_000,
	}
}

// testTerms: terms round-trip exactly (a seed above 2^63 included), a
// later write replaces them, Lost comes back sorted, and a campaign
// without terms or packets says which is missing.
func testTerms(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cents := []int64{5, 1, 7, 3}
	require.ErrorIs(t, l.WriteTerms(ctx, "c", termsOf(cents)), ledger.ErrNoPackets, "packets first")
	_, err := l.Terms(ctx, "c")
	require.ErrorIs(t, err, ledger.ErrNoPackets)
	require.NoError(t, l.WritePackets(ctx, "c", cents))
	_, err = l.Terms(ctx, "c")
	require.ErrorIs(t, err, ledger.ErrNoTerms)

	want := termsOf(cents)
	require.NoError(t, l.WriteTerms(ctx, "c", want))
	got, err := l.Terms(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, want, got)

	want.OpensAt, want.ClosesAt = 1_800_000_000_000, 1_800_000_000_001
	want.CloseReason, want.ClosedAt = "operator", 1_800_000_000_000
	want.Lost = []int64{4, 2}
	require.NoError(t, l.WriteTerms(ctx, "c", want), "a later write replaces the terms")
	got, err = l.Terms(ctx, "c")
	require.NoError(t, err)
	want.Lost = []int64{2, 4}
	require.Equal(t, want, got)
	require.Equal(t, ledger.Totals{PacketCount: 4, PacketCents: 16}, totals(t, l, "c"), "terms move no money")
}

func testTermsInvalid(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cents := []int64{5, 1, 7, 3}
	require.NoError(t, l.WritePackets(ctx, "c", cents))
	good := termsOf(cents)
	require.NoError(t, l.WriteTerms(ctx, "c", good))
	for _, tc := range []struct {
		name string
		edit func(*ledger.Terms)
	}{
		{"another count", func(t *ledger.Terms) { t.Count = 5 }},
		{"another total", func(t *ledger.Terms) { t.Total = 17 }},
		{"no funding", func(t *ledger.Terms) { t.Funding = "" }},
		{"no shards", func(t *ledger.Terms) { t.Shards = 0 }},
		{"empty window", func(t *ledger.Terms) { t.ClosesAt = t.OpensAt }},
		{"lost seq 0", func(t *ledger.Terms) { t.Lost = []int64{0} }},
		{"lost seq past the packets", func(t *ledger.Terms) { t.Lost = []int64{5} }},
		{"lost twice", func(t *ledger.Terms) { t.Lost = []int64{3, 3} }},
	} {
		bad := good
		tc.edit(&bad)
		require.ErrorIs(t, l.WriteTerms(ctx, "c", bad), ledger.ErrInvalid, tc.name)
	}
	got, err := l.Terms(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, good, got, "refused terms change nothing")
}
