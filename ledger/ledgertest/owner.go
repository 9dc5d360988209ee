package ledgertest

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// wellFormedIdentity is the form of every ledger identity.
var wellFormedIdentity = regexp.MustCompile(`^ledger-[0-9a-f]{32}$`)

// identity returns l's identity, which must be well formed.
func identity(t *testing.T, l ledger.Ledger) string {
	t.Helper()
	id, err := l.Identity(ctx)
	require.NoError(t, err)
	require.Regexp(t, wellFormedIdentity, id)
	return id
}

// testIdentity: a ledger has a well-formed identity, the same for every
// ledger opened on its database (another process), before and after
// they all close and it is opened again, and for ledgers that created the
// database at once; another database has another one.
func testIdentity(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	first := open(t)
	id := identity(t, first)
	require.Equal(t, id, identity(t, first), "asked again")
	second := open(t)
	require.Equal(t, id, identity(t, second), "another ledger on the database")
	require.NoError(t, first.Close())
	require.NoError(t, second.Close())
	require.Equal(t, id, identity(t, open(t)), "the database opened again")

	others := map[string]bool{id: true}
	for _, name := range []string{"another database", "a third database"} {
		t.Run(name, func(t *testing.T) {
			other := identity(t, open(t))
			require.NotContains(t, others, other)
			others[other] = true
		})
	}

	t.Run("opened at once", func(t *testing.T) {
		// Ledgers that create one database at once (processes starting
		// together) migrate it once, and so draw one identity.
		const k = 3
		ids := make([]string, k)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := open(t) // on failure open fails t and ends this goroutine
				ids[i], _ = l.Identity(ctx)
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		require.Regexp(t, wellFormedIdentity, ids[0])
		require.Equal(t, []string{ids[0], ids[0], ids[0]}, ids)
		require.NotEqual(t, id, ids[0])
	})
}

// ownedWrite is one of the writes that check the owner their ctx
// carries: prepare readies campaign c for it (with no owner), write
// makes it, and accounts are those it moves.
type ownedWrite struct {
	name     string
	campaign func(c string) string
	prepare  func(t *testing.T, l ledger.Ledger, c string)
	write    func(ctx context.Context, l ledger.Ledger, c string) error
	accounts func(c string) []string
}

var ownedWrites = []ownedWrite{
	{
		name:     "fund",
		campaign: func(c string) string { return c },
		prepare:  func(*testing.T, ledger.Ledger, string) {},
		write: func(ctx context.Context, l ledger.Ledger, c string) error {
			return l.Fund(ctx, ledger.Campaign{ID: c, Funding: "ops", Total: 100})
		},
		accounts: func(c string) []string { return []string{ledger.EscrowAccount(c), ledger.FundingAccount("ops")} },
	},
	{
		name:     "grants",
		campaign: func(c string) string { return c },
		prepare:  func(t *testing.T, l ledger.Ledger, c string) { fund(t, l, c, 100) },
		write: func(ctx context.Context, l ledger.Ledger, c string) error {
			_, err := l.ApplyGrants(ctx, c, []ledger.Grant{g(c, 1, "a", 40), g(c, 2, "b", 60)})
			return err
		},
		accounts: func(c string) []string { return []string{ledger.EscrowAccount(c), "user:a", "user:b"} },
	},
	{
		name:     "discounts",
		campaign: ledger.DiscountCampaign,
		prepare:  func(t *testing.T, l ledger.Ledger, c string) { fund(t, l, c, 100) },
		write: func(ctx context.Context, l ledger.Ledger, c string) error {
			_, err := l.ApplyDiscounts(ctx, c, []ledger.Discount{{Campaign: c, User: "a", Order: "o1", Seq: 1, Cents: 30}})
			return err
		},
		accounts: func(c string) []string { return []string{ledger.EscrowAccount(c), "user:a"} },
	},
	{
		name:     "refund",
		campaign: func(c string) string { return c },
		prepare:  func(t *testing.T, l ledger.Ledger, c string) { fund(t, l, c, 100) },
		write:    func(ctx context.Context, l ledger.Ledger, c string) error { return l.Refund(ctx, c, 100) },
		accounts: func(c string) []string { return []string{ledger.EscrowAccount(c), ledger.FundingAccount("ops")} },
	},
}

// testForeign: each write that checks the owner its ctx carries (Fund,
// ApplyGrants, ApplyDiscounts, Refund) is refused under another
// ledger's or sink's identity, with a *ForeignError, and writes nothing;
// the same write then goes in under the ledger's own identity, and
// under no owner or an empty one (campaigns created before owners were
// recorded).
func testForeign(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	own := identity(t, l)
	for _, w := range ownedWrites {
		t.Run(w.name, func(t *testing.T) {
			c := w.campaign(w.name)
			w.prepare(t, l, c)
			before := snap(t, l, c, w.accounts(c)...)
			for _, owner := range []string{"ledger-00000000000000000000000000000000", "webhook-wallet", own + "x", " " + own} {
				err := w.write(ledger.WithOwner(ctx, owner), l, c)
				fe := requireAs[*ledger.ForeignError](t, err, ledger.ErrForeign)
				require.Equal(t, ledger.ForeignError{Campaign: c, Owner: owner, Ledger: own}, *fe)
				before.requireUnchanged(t, l)
			}
			require.NoError(t, w.write(ledger.WithOwner(ctx, own), l, c), "under its own identity")
			after := snap(t, l, c, w.accounts(c)...)
			require.NotEqual(t, before, after, "the write under its own identity moved money")

			for name, ctx := range map[string]context.Context{
				"none":  ctx,
				"empty": ledger.WithOwner(ctx, ""),
			} {
				c := w.campaign(w.name + "-" + name)
				w.prepare(t, l, c)
				before := snap(t, l, c, w.accounts(c)...)
				require.NoError(t, w.write(ctx, l, c), "owner %s", name)
				require.NotEqual(t, before, snap(t, l, c, w.accounts(c)...), "owner %s", name)
			}
		})
	}
}
