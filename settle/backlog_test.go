package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestReadBacklog: grabs not yet settled are a backlog, with the age of
// the oldest; a drained campaign has none; a missing campaign is
// ErrNoCampaign.
func TestReadBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, err := settle.ReadBacklog(ctx, e.redis.Client, "", testenv.UniqueID(t))
	require.ErrorIs(t, err, settle.ErrNoCampaign)

	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10})
	require.NoError(t, err)
	b, err := settle.ReadBacklog(ctx, e.redis.Client, "", c.ID)
	require.NoError(t, err)
	require.Equal(t, settle.Backlog{}, b, "nothing granted, nothing to settle")

	start := time.Now()
	for _, u := range []string{"a", "b", "c"} { // one grab call, one batch each
		g, err := e.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
	}
	b, err = settle.ReadBacklog(ctx, e.redis.Client, "", c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 3, b.Lag)
	require.Zero(t, b.Pending)
	require.Zero(t, b.Dead)
	require.EqualValues(t, 3, b.Unsettled())
	// The first grant waited since it was made, by the Redis clock, which
	// runs on this machine.
	require.LessOrEqual(t, b.Oldest, time.Since(start)+time.Millisecond)

	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	b, err = settle.ReadBacklog(ctx, e.redis.Client, "", c.ID)
	require.NoError(t, err)
	require.Equal(t, settle.Backlog{}, b, "drained")
}

// TestRedriveWithoutWorker: the package-level Redrive moves dead entries
// back for the next pass to settle, needs no worker, and refuses a
// campaign that does not exist.
func TestRedriveWithoutWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, err := settle.Redrive(ctx, e.redis.Client, "", testenv.UniqueID(t))
	require.ErrorIs(t, err, settle.ErrNoCampaign)

	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10})
	require.NoError(t, err)
	n, err := settle.Redrive(ctx, e.redis.Client, "", c.ID)
	require.NoError(t, err)
	require.Zero(t, n, "nothing dead, nothing moved")

	_, err = e.eng.Grab(ctx, c.ID, "good")
	require.NoError(t, err)
	rc := e.redis.Client
	k := redisstore.Default.CampaignKeys(c.ID)
	require.NoError(t, rc.Do(ctx, rc.B().Xadd().Key(k.Grants).Id("*").FieldValue().FieldValue("mallory", "not-a-packet").Build()).Error())
	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	b, err := settle.ReadBacklog(ctx, rc, "", c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, b.Dead)

	n, err = settle.Redrive(ctx, rc, "", c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	b, err = settle.ReadBacklog(ctx, rc, "", c.ID)
	require.NoError(t, err)
	require.Zero(t, b.Dead)
	require.EqualValues(t, 1, b.Lag, "back in the grants stream, for the next pass")
}
