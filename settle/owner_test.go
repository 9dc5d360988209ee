package settle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// TestLedgerRefusesForeignWrites: a worker told to settle for an owner
// (Config.Owner) that is not its ledger's identity settles nothing of that
// owner's campaigns: the ledger refuses every write (ledger.ErrForeign),
// the entries stay pending, and the campaign is neither funded, paid nor
// refunded. Once the worker runs with the right owner, it settles all.
func TestLedgerRefusesForeignWrites(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Owner: "wallet:elsewhere"})
	require.NoError(t, err)
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100})
	require.NoError(t, err)
	require.Equal(t, "wallet:elsewhere", c.Owner)
	granted, _ := rain(t, eng, c.ID, 40)
	require.EqualValues(t, 40, granted)
	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)

	l := openSQLite(t)
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Owner: "wallet:elsewhere", Consumer: "w", Logger: quiet(),
		Only: []string{c.ID}, MaxBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	_, err = w.Pass(ctx)
	require.ErrorIs(t, err, ledger.ErrForeign)
	var fe *ledger.ForeignError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "wallet:elsewhere", fe.Owner)
	tot, err := l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{}, tot, "nothing of a foreign campaign is written")
	b, err := settle.ReadBacklog(ctx, r.Client, "", c.ID)
	require.NoError(t, err)
	require.Positive(t, b.Unsettled(), "the entries stay pending")

	id, err := l.Identity(ctx)
	require.NoError(t, err)
	_, err = eng.SetOwner(ctx, c.ID, hongbao.OwnerChange{From: "wallet:elsewhere", To: id, Reason: "settles into this ledger"})
	require.ErrorIs(t, err, hongbao.ErrOwnerSettling, "the refused entries are still delivered to the misconfigured worker")
	_, err = eng.SetOwner(ctx, c.ID, hongbao.OwnerChange{From: "wallet:elsewhere", To: id, Reason: "settles into this ledger",
		DespitePending: true}) // the ledger refused every one: none was written anywhere
	require.NoError(t, err)
	w2, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "w", Logger: quiet(), Only: []string{c.ID}})
	require.NoError(t, err)
	_, err = w2.Drain(ctx)
	require.NoError(t, err)
	tot, err = l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 40, tot.GrantCount)
	require.True(t, tot.RefundDone)
}
