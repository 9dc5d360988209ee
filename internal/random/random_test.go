package random

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHex(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, n := range []int{0, 1, 6, 12, 32} {
		s := Hex(n)
		require.Len(t, s, 2*n)
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		require.Len(t, b, n)
		if n >= 6 {
			require.False(t, seen[s], "a repeated draw of %d bytes", n)
			seen[s] = true
			require.NotEqual(t, s, Hex(n), "two draws of %d bytes alike", n)
		}
	}
}
