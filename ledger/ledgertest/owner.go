package ledgertest

import (
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
