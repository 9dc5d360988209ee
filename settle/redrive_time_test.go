package settle_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
)

// TestRedriveKeepsGrantTime: a grant the ledger refused, dead-lettered,
// then redriven once the cause is fixed, settles with the time the grab
// answered (Redis' clock at the grant), not the redrive's: the receipt
// and the draw log tell the user the time they were told.
func TestRedriveKeepsGrantTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 100})
	require.NoError(t, err)
	grants := map[string]hongbao.Grant{}
	for u := 0; u < 4; u++ {
		user := "u" + strconv.Itoa(u)
		g, err := e.eng.Grab(ctx, c.ID, user)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		require.False(t, g.GrantedAt.IsZero())
		grants[user] = g
	}
	p := &picky{Ledger: e.l, culprit: "u2"}
	w := e.worker(t, p, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond) // the redrive comes later, by Redis' clock too

	p.culprit = ""
	n, err := w.Redrive(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	cm, ok := e.l.(ledger.Committer)
	require.True(t, ok)
	for user, g := range grants {
		holder, at, err := cm.GrantTime(ctx, c.ID, g.Seq)
		require.NoError(t, err)
		require.Equal(t, user, holder)
		require.Equal(t, g.GrantedAt.UnixMilli(), at.UnixMilli(), "grant time of %s (%s)", user, g.PacketID())
	}
}
