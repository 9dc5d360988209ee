package hongbao_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

// TestTermsRecorded: with a ledger as Config.Packets, Create records the
// campaign's terms before it goes live, with the window it gets (resolved
// by the Redis clock when the spec leaves it out), and Close records an
// operator's close, keeping the packets a rebuild found lost.
func TestTermsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l})
	require.NoError(t, err)
	seed := uint64(1<<63 + 7)
	for _, shards := range []int{1, 3} {
		c := create(t, eng, hongbao.Spec{Total: 5000, Count: 50, Shards: shards, Funding: "ops", Seed: &seed,
			ClosesAt: time.Now().Add(time.Hour).Truncate(time.Millisecond)})
		terms, err := l.Terms(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, ledger.Terms{
			Funding: "ops", Total: 5000, Count: 50, Min: c.Min, Max: c.Max, Split: string(c.Split), Seed: seed,
			Shards: shards, OpensAt: c.OpensAt.UnixMilli(), ClosesAt: c.ClosesAt.UnixMilli(),
		}, terms)

		lost := terms
		lost.Lost = []int64{3}
		require.NoError(t, l.WriteTerms(ctx, c.ID, lost))
		st, err := eng.Close(ctx, c.ID)
		require.NoError(t, err)
		closed, err := l.Terms(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseOperator, closed.CloseReason)
		require.Equal(t, st.Now.UnixMilli(), closed.ClosedAt)
		require.Equal(t, []int64{3}, closed.Lost, "the lost packets stay recorded")
		require.Equal(t, terms.OpensAt, closed.OpensAt)
	}
}
