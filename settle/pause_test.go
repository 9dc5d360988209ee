package settle_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestPauseMidRain: a sharded campaign is paused while users grab and a
// worker settles; while paused the grants stand still with grabs still
// arriving, the audit is clean and, once the worker caught up, so is
// reconcile; then it resumes, the rain ends sold out, and the campaign
// settles to the cent with reconcile clean.
func TestPauseMidRain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const packets = 3000
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 600_000, Count: packets, Shards: 3})
	require.NoError(t, err)
	w := e.worker(t, e.l, "w1", c.ID)
	require.NoError(t, w.Start(ctx))

	var next, granted, grantedCents, paused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, err := e.eng.Grab(ctx, c.ID, "r"+strconv.FormatInt(next.Add(1), 10))
				if err != nil {
					t.Error(err)
					return
				}
				switch g.Outcome {
				case hongbao.Granted:
					granted.Add(1)
					grantedCents.Add(g.Cents)
				case hongbao.Paused:
					paused.Add(1)
				}
			}
		}()
	}
	require.Eventually(t, func() bool { return granted.Load() >= packets/3 }, 20*time.Second, time.Millisecond)
	st, err := e.eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, st.Paused)
	atPause := granted.Load()
	require.Eventually(t, func() bool { return paused.Load() > 300 }, 20*time.Second, time.Millisecond)
	before, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return paused.Load() > 600 }, 20*time.Second, time.Millisecond)
	after, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, before.GrantedCount, after.GrantedCount, "no grant while paused")
	require.Equal(t, before.RemainingCents, after.RemainingCents)
	require.Less(t, after.GrantedCount, int64(packets))
	a, err := e.eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit while paused: %v", a.Problems)
	require.Eventually(t, func() bool {
		rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
		return err == nil && rep.OK
	}, 20*time.Second, 20*time.Millisecond, "reconcile while paused, once settled up")

	_, err = e.eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return granted.Load() == packets }, 30*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()
	require.Greater(t, granted.Load(), atPause)

	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w.Stop()
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	st, err = e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.EqualValues(t, packets, st.GrantedCount)
	require.Equal(t, grantedCents.Load(), st.GrantedCents)
	require.Zero(t, st.RefundedCents)
	tot, err := e.l.Totals(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, packets, tot.GrantCount)
	require.Equal(t, int64(600_000), tot.GrantCents)
	require.Zero(t, tot.Escrow)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
}

// TestPausedCampaignClosesOnTime: a campaign paused to the end of its
// window closes by time and is refunded as any other.
func TestPausedCampaignClosesOnTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100, ClosesAt: time.Now().Add(2 * time.Second)})
	require.NoError(t, err)
	g, err := e.eng.Grab(ctx, c.ID, "early")
	require.NoError(t, err)
	require.Equal(t, hongbao.Granted, g.Outcome)
	_, err = e.eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := e.eng.Status(ctx, c.ID)
		return err == nil && st.State == hongbao.StateClosed
	}, 10*time.Second, 20*time.Millisecond)

	w := e.worker(t, e.l, "w1", c.ID)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Equal(t, hongbao.CloseTime, st.CloseReason)
	require.Equal(t, 10_000-g.Cents, st.RefundedCents)
	rep, err := settle.Reconcile(ctx, e.redis.Client, "", e.l, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
}
