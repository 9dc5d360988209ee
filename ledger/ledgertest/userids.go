package ledgertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// testUserIDs: user ids holding the characters a bulk load must escape
// (tab, newline, carriage return, backslash, the text format's \N), and
// non-ASCII ones, come back from Grants and Balance exactly as written,
// on the fast path of new grants and on the path of a batch with a replay.
func testUserIDs(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	users := []string{"tab\there", "new\nline", "cr\rhere", `back\slash`, `\N`, `\\.`, "ünï 红包", `quote'"`, " spaced "}
	var want []ledger.Grant
	var total int64
	for i, u := range users {
		want = append(want, g("c", int64(i+1), u, int64(10+i)))
		total += int64(10 + i)
	}
	fund(t, l, "c", total)
	apply(t, l, "c", want[:5]...)
	apply(t, l, "c", want...) // five replays with four new grants
	var got []ledger.Grant
	require.NoError(t, l.Grants(ctx, "c", func(gr ledger.Grant) error { got = append(got, gr); return nil }))
	require.Equal(t, want, got)
	for _, gr := range want {
		b, err := l.Balance(ctx, ledger.UserAccount(gr.User))
		require.NoError(t, err)
		require.Equal(t, gr.Cents, b, "%q", gr.User)
	}
}
