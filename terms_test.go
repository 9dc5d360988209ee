package hongbao_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
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
			Block: hongbao.DefaultBlockSize, // the ledger records blocks: the pools open in blocks
			Owner: ownerOf(t, l),            // the ledger's identity: it is what the campaign settles into
		}, terms)

		lost := terms
		lost.Lost = []int64{3}
		require.NoError(t, l.WriteTerms(ctx, c.ID, lost))
		st, err := eng.CloseCampaign(ctx, c.ID)
		require.NoError(t, err)
		closed, err := l.Terms(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, hongbao.CloseOperator, closed.CloseReason)
		// When the close happened, as the root records it (and a rebuild
		// restores it): before the status read that answered the close.
		root, err := redisstore.New(r.Client).Status(ctx, redisstore.Default.CampaignKeys(c.ID))
		require.NoError(t, err)
		require.Equal(t, root.Int("closed_at"), closed.ClosedAt)
		require.LessOrEqual(t, closed.ClosedAt, st.Now.UnixMilli())
		require.Equal(t, []int64{3}, closed.Lost, "the lost packets stay recorded")
		require.Equal(t, terms.OpensAt, closed.OpensAt)
	}
}

// crashAfterTerms records the packets and the terms, then fails: a create
// that died after recording and before its campaign went live.
type crashAfterTerms struct{ ledger.Ledger }

func (c crashAfterTerms) WriteTerms(ctx context.Context, id string, t ledger.Terms) error {
	if err := c.Ledger.WriteTerms(ctx, id, t); err != nil {
		return err
	}
	return errors.New("died after recording")
}

// TestRetriedCreateReusesRecordedSeed: a create retried without a seed
// after the first attempt recorded its packets (as serve retries one under
// an Idempotency-Key) records the same packets again and goes live,
// instead of drawing a new split that the ledger refuses.
func TestRetriedCreateReusesRecordedSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	r := testenv.SharedRedis(t)
	for _, shards := range []int{1, 3} {
		spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 5000, Count: 50, Shards: shards}
		first, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: crashAfterTerms{l}})
		require.NoError(t, err)
		_, err = first.Create(ctx, spec)
		require.ErrorContains(t, err, "died after recording")
		var recorded []int64
		require.NoError(t, l.Packets(ctx, spec.ID, func(p ledger.Packet) error {
			recorded = append(recorded, p.Cents)
			return nil
		}))

		again, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l})
		require.NoError(t, err)
		c, err := again.Create(ctx, spec)
		require.NoError(t, err)
		require.Equal(t, hongbao.StateOpen, c.State)
		var got []int64
		require.NoError(t, l.Packets(ctx, spec.ID, func(p ledger.Packet) error {
			got = append(got, p.Cents)
			return nil
		}))
		require.Equal(t, recorded, got)

		// Another spec under the same id is not taken for a retry.
		other := spec
		other.ID = testenv.UniqueID(t)
		_, err = first.Create(ctx, other)
		require.Error(t, err)
		other.Total = 6000
		_, err = again.Create(ctx, other)
		require.ErrorIs(t, err, ledger.ErrConflict)
	}
}

// ownerOf is l's identity, the owner an engine with l as Config.Packets
// records in its campaigns.
func ownerOf(t *testing.T, l interface {
	Identity(context.Context) (string, error)
}) string {
	t.Helper()
	id, err := l.Identity(context.Background())
	require.NoError(t, err)
	return id
}
