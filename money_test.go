package hongbao_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// TestCentsWrappers: the root's ParseCents and FormatCents are package
// money's, with the root's error: every refused amount is an *AmountError
// for errors.Is(err, ErrInvalidAmount).
func TestCentsWrappers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "7.1": 710, "92233720368547758.07": math.MaxInt64} {
		got, err := hongbao.ParseCents(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "1.005", "-1", "1e3", "92233720368547758.08"} {
		_, err := hongbao.ParseCents(in)
		require.ErrorIs(t, err, hongbao.ErrInvalidAmount, in)
		var ae *hongbao.AmountError
		require.ErrorAs(t, err, &ae, in)
		require.Equal(t, in, ae.Input)
	}
	require.Equal(t, "-7.10", hongbao.FormatCents(-710))
	require.Equal(t, "a12.85", string(hongbao.AppendCents([]byte("a"), 1285)))
}
