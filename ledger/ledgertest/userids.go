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

// testUserIDsNotText: a user id or an order id that is not text (a NUL
// byte, bytes that are not UTF-8) is ErrInvalid on every backend, and
// the batch writes nothing: PostgreSQL cannot store it, so it must not
// be an error settlement tries again for ever, and SQLite must not take
// what PostgreSQL refuses.
func testUserIDsNotText(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c", 100)
	fund(t, l, dc, 100)
	for _, bad := range []string{"nul\x00here", "not\xffutf8", "\xc3"} {
		_, err := l.ApplyGrants(ctx, "c", []ledger.Grant{g("c", 1, "ok", 1), g("c", 2, bad, 1)})
		require.ErrorIs(t, err, ledger.ErrInvalid, "user %q", bad)
		_, err = l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("ok", "o", 1, 1), dsc(bad, "o", 2, 1)})
		require.ErrorIs(t, err, ledger.ErrInvalid, "user %q", bad)
		_, err = l.ApplyDiscounts(ctx, dc, []ledger.Discount{dsc("ok", bad, 1, 1)})
		require.ErrorIs(t, err, ledger.ErrInvalid, "order %q", bad)
	}
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", Escrow: 100}, totals(t, l, "c"))
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", Escrow: 100}, totals(t, l, dc))
}
