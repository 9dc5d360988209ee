package hongbao_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestClosedRedisClient: after the host closes the engine's Redis client,
// grabs, reads and discount calls answer ErrClosed, a permanent refusal
// (nothing was sent), not ErrOutcomeUnknown forever; only the call that
// found the client closed may not know whether it was sent.
func TestClosedRedisClient(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	require.NoError(t, err)
	eng, err := hongbao.New(hongbao.Config{Redis: rc, WithoutLedger: true})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 1000, Count: 10})
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1000, Quota: 10, PerUserCount: 1})
	require.NoError(t, err)
	g, err := eng.Grab(ctx, c.ID, "before")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)

	rc.Close()
	_, err = eng.Grab(ctx, c.ID, "finder")
	require.Error(t, err)
	if !errors.Is(err, hongbao.ErrClosed) {
		require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "the call that finds the client closed")
	}
	for _, user := range []string{"a", "b", "before"} {
		_, err := eng.Grab(ctx, c.ID, user)
		requireClosedErr(t, err)
	}
	_, err = eng.Held(ctx, c.ID, "before")
	requireClosedErr(t, err)
	_, err = eng.Status(ctx, c.ID)
	requireClosedErr(t, err)
	_, err = eng.Discounts().Reserve(ctx, d.ID, "a", "o1", 100)
	requireClosedErr(t, err)
	_, err = eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10})
	requireClosedErr(t, err)
	_, err = eng.Campaigns(ctx)
	requireClosedErr(t, err)

	st, err := testenvEngine(t, r).Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.GrantedCount, "nothing was granted after the close")
}

// requireClosedErr checks that err is ErrClosed and nothing else a caller
// would retry on.
func requireClosedErr(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, hongbao.ErrClosed)
	require.NotErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	require.NotErrorIs(t, err, hongbao.ErrBusy)
	requireOnePrefix(t, err)
}

// testenvEngine is a bare engine on the test's own open client.
func testenvEngine(t *testing.T, r *testenv.Redis) *hongbao.Engine {
	t.Helper()
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, WithoutLedger: true})
	require.NoError(t, err)
	return eng
}
