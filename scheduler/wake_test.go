package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/scheduler"
)

// grantCounter is an embedder's own observer: it counts grants.
type grantCounter struct {
	hongbao.NopObserver
	n atomic.Int64
}

func (c *grantCounter) ObserveGrab(ev hongbao.GrabEvent) {
	if ev.Err == nil && ev.Grant.Outcome == hongbao.Granted {
		c.n.Add(1)
	}
}

// TestPublisherBesideOtherObservers: an embedder's observer, given before
// the Publisher starts and another added after it, and the Publisher all
// hear the same grant: the wake message is published and both count it.
// Stopping the Publisher leaves the embedder's observers hearing.
func TestPublisherBesideOtherObservers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	before, after := &grantCounter{}, &grantCounter{}
	f.eng.Observe(before)
	pub := scheduler.Publish(f.redis.Client, f.eng)
	f.eng.Observe(after)

	woken := make(chan struct{}, 16)
	sctx, cancel := context.WithCancel(ctx)
	subscribed := make(chan error, 1)
	go func() {
		subscribed <- f.redis.Client.Receive(sctx, f.redis.Client.B().Subscribe().Channel(scheduler.WakeChannel("")).Build(),
			func(rueidis.PubSubMessage) { woken <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-subscribed })
	waitFor(t, "the subscription", 5*time.Second, func() bool {
		n, err := f.redis.Client.Do(ctx, f.redis.Client.B().PubsubNumsub().Channel(scheduler.WakeChannel("")).Build()).AsIntMap()
		return err == nil && n[scheduler.WakeChannel("")] == 1
	})

	c, err := f.eng.Create(ctx, hongbao.Spec{Total: 1000, Count: 10})
	require.NoError(t, err)
	_, err = f.eng.Grab(ctx, c.ID, "u1")
	require.NoError(t, err)
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake message after a grant")
	}
	require.EqualValues(t, 1, before.n.Load())
	require.EqualValues(t, 1, after.n.Load())

	pub.Stop()
	_, err = f.eng.Grab(ctx, c.ID, "u2")
	require.NoError(t, err)
	require.EqualValues(t, 2, before.n.Load(), "the Publisher's stop takes out only itself")
	require.EqualValues(t, 2, after.n.Load())
}
