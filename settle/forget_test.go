package settle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestWorkerForgetsRetiredCampaigns: what a worker remembers of a campaign
// between passes goes once the campaign is retired, so a long-running
// process does not grow with every campaign it ever settled.
func TestWorkerForgetsRetiredCampaigns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100_000, Count: 100, Shards: 2})
	require.NoError(t, err)
	w := e.worker(t, e.l, "w1", c.ID)

	rain(t, e.eng, c.ID, 50)
	_, err = w.Pass(ctx)
	require.NoError(t, err)
	require.Positive(t, w.Remembered(), "a live campaign's fund mark and stream positions are kept")

	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	_, err = w.Pass(ctx) // the registry no longer lists it
	require.NoError(t, err)
	require.Zero(t, w.Remembered())
}
