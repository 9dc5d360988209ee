package hongbao_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// TestSettleBusy: grabs of a campaign set busy answer ErrBusy without
// touching Redis (the pool is untouched), others grant; clearing the set
// grants again.
func TestSettleBusy(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	a := create(t, eng, hongbao.Spec{Total: 1000, Count: 10})
	b := create(t, eng, hongbao.Spec{Total: 1000, Count: 10})

	eng.SetSettleBusy([]string{a.ID})
	_, err := eng.Grab(ctx, a.ID, "u1")
	require.ErrorIs(t, err, hongbao.ErrBusy)
	st, err := eng.Status(ctx, a.ID)
	require.NoError(t, err)
	require.EqualValues(t, 10, st.RemainingCount, "a busy grab never reached Redis")
	g, err := eng.Grab(ctx, b.ID, "u1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)

	eng.SetSettleBusy(nil)
	g, err = eng.Grab(ctx, a.ID, "u1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	g, err = eng.Grab(ctx, a.ID, "u1")
	require.NoError(t, err)
	require.Equal(t, hongbao.Already, g.Outcome)
}
