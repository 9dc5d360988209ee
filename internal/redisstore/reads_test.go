package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// activate makes a live campaign of count packets of 10 cents.
func activate(t *testing.T, s *redisstore.Store, id string, count int) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 10 * int64(count), Count: int64(count)}})
	require.NoError(t, err)
	amounts := make([]int64, count)
	for i := range amounts {
		amounts[i] = 10
	}
	require.NoError(t, s.Load(ctx, redisstore.Default.CampaignKeys(id), "tok", 1, 1, amounts, nil))
	_, err = s.Activate(ctx, redisstore.Default.CampaignKeys(id), "tok", 0, 0, time.Hour.Milliseconds())
	require.NoError(t, err)
}

func redisMs(t *testing.T, s *redisstore.Store) int64 {
	t.Helper()
	c := s.Client()
	ts, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return ts[0]*1000 + ts[1]/1000
}

// TestBacklog: counts of lagging, pending and dead entries, and the age of
// the oldest unsettled entry: the oldest pending one, else the first after
// the last delivered, never a settled entry still in the stream.
func TestBacklog(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	id := testenv.UniqueID(t)

	_, err := s.Backlog(ctx, redisstore.Default.CampaignKeys(id))
	require.ErrorIs(t, err, redisstore.ErrNoCampaign, "no campaign")
	_, err = s.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: 30, Count: 3}})
	require.NoError(t, err)
	_, err = s.Backlog(ctx, redisstore.Default.CampaignKeys(id))
	require.ErrorIs(t, err, redisstore.ErrNoCampaign, "still loading")
	activate(t, s, id, 3)

	b, err := s.Backlog(ctx, redisstore.Default.CampaignKeys(id))
	require.NoError(t, err)
	require.Zero(t, b.Lag+b.Pending+b.Dead)
	require.Zero(t, b.OldestAge)

	// Three entries written 90, 60 and 30 seconds ago by the Redis clock
	// (explicit ids, so the ages are known).
	now := redisMs(t, s)
	k := redisstore.Default.CampaignKeys(id)
	c := r.Client
	for i, ago := range []int64{90, 60, 30} {
		entry := strconv.FormatInt(now-ago*1000, 10) + "-0"
		user := "u" + strconv.Itoa(i+1)
		require.NoError(t, c.Do(ctx, c.B().Xadd().Key(k.Grants).Id(entry).FieldValue().
			FieldValue(user, redisstore.FormatPacket(int64(i+1), 10)).Build()).Error())
	}
	// age checks that the oldest entry is the one written ago seconds
	// before now: its age is at least that, and at most that plus the
	// time since now.
	age := func(b redisstore.Backlog, ago int64) {
		t.Helper()
		lo := time.Duration(ago) * time.Second
		hi := lo + time.Duration(redisMs(t, s)-now)*time.Millisecond
		require.True(t, b.OldestAge >= lo && b.OldestAge <= hi, "oldest %s, want within %s..%s", b.OldestAge, lo, hi)
	}
	backlog := func() redisstore.Backlog {
		t.Helper()
		b, err := s.Backlog(ctx, redisstore.Default.CampaignKeys(id))
		require.NoError(t, err)
		return b
	}

	b = backlog()
	require.EqualValues(t, 3, b.Lag)
	require.Zero(t, b.Pending)
	age(b, 90) // nothing delivered: the first entry

	// The first is settled (delivered and acknowledged, not trimmed).
	es, err := s.ReadGroup(ctx, redisstore.Default.CampaignKeys(id), "w1", 1, false)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.NoError(t, s.Ack(ctx, redisstore.Default.CampaignKeys(id), es[0].ID))
	b = backlog()
	require.EqualValues(t, 2, b.Lag)
	age(b, 60) // the first after the last delivered, not the settled one

	// The second is delivered, not acknowledged: pending.
	es, err = s.ReadGroup(ctx, redisstore.Default.CampaignKeys(id), "w1", 1, false)
	require.NoError(t, err)
	require.Len(t, es, 1)
	b = backlog()
	require.EqualValues(t, 1, b.Lag)
	require.EqualValues(t, 1, b.Pending)
	age(b, 60) // the oldest pending one

	// It goes to the dead stream; the third is delivered and pending.
	require.NoError(t, s.Dead(ctx, redisstore.Default.CampaignKeys(id), es[0].ID, "test", []redisstore.DeadGrant{{User: "u2", Packet: "2:10"}}))
	// A second settler burying it too (a part's previous holder) writes
	// nothing: it is no longer pending.
	require.NoError(t, s.Dead(ctx, redisstore.Default.CampaignKeys(id), es[0].ID, "test", []redisstore.DeadGrant{{User: "u2", Packet: "2:10"}}))
	_, err = s.ReadGroup(ctx, redisstore.Default.CampaignKeys(id), "w1", 1, false)
	require.NoError(t, err)
	b = backlog()
	require.Zero(t, b.Lag)
	require.EqualValues(t, 1, b.Pending)
	require.EqualValues(t, 1, b.Dead)
	age(b, 30)
}

// TestRegister: the registry holds campaigns by close time; registering
// again moves one.
func TestRegister(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"}) // its own registry
	s := redisstore.New(r.Client)
	ctx := context.Background()
	require.NoError(t, s.Register(ctx, redisstore.RedPacket, "b", 2000))
	require.NoError(t, s.Register(ctx, redisstore.RedPacket, "a", 3000))
	ids, err := s.Campaigns(ctx, redisstore.RedPacket)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a"}, ids)
	require.NoError(t, s.Register(ctx, redisstore.RedPacket, "b", 4000))
	ids, err = s.Campaigns(ctx, redisstore.RedPacket)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, ids)
}
