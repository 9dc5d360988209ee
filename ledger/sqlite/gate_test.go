package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// TestOpenBlockGoesFirst: while a long batch writes, settlement batches
// queue for the write lock and then OpenBlock (which a grab waits for)
// arrives: it is served as soon as the long batch commits, before the
// batches that queued earlier.
func TestOpenBlockGoesFirst(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx := context.Background()
	require.NoError(t, l.WritePackets(ctx, "c", []int64{10, 10, 10, 10, 10, 10}))
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 60}))

	var mu sync.Mutex
	var order []string
	l.write.served = func(urgent bool) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, map[bool]string{true: "block", false: "batch"}[urgent])
	}
	// The long batch: a write transaction held open until released.
	inside, release := make(chan struct{}), make(chan struct{})
	longDone := make(chan error, 1)
	go func() {
		longDone <- l.tx(ctx, func(*sql.Tx) error { close(inside); <-release; return nil })
	}()
	<-inside
	const queued = 3
	var wg sync.WaitGroup
	errs := make([]error, queued+1)
	for i := range queued {
		wg.Go(func() {
			_, errs[i] = l.ApplyGrants(ctx, "c", []ledger.Grant{{Campaign: "c", Seq: int64(i + 1), User: fmt.Sprint("u", i), Cents: 10}})
		})
		waitQueued(t, l, 0, i+1)
	}
	wg.Go(func() {
		errs[queued] = l.OpenBlock(ctx, "c", ledger.Block{ID: "b1", Shard: 0, Seqs: []int64{4, 5, 6}})
	})
	waitQueued(t, l, 1, queued)
	close(release)
	require.NoError(t, <-longDone)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []string{"batch", "block", "batch", "batch", "batch"}, order,
		"the long batch, then OpenBlock, then the batches queued before it")
}

// waitQueued waits until the gate has urgent and normal writers queued.
func waitQueued(t *testing.T, l *Ledger, urgent, normal int) {
	t.Helper()
	require.Eventually(t, func() bool {
		u, n := l.write.waiting()
		return u == urgent && n == normal
	}, 10*time.Second, time.Millisecond)
}

// TestGateCancel: a writer whose ctx ends while it waits leaves the queue
// and the gate still serves the others; one whose ctx ends just as the
// gate is handed to it passes the gate on.
func TestGateCancel(t *testing.T) {
	t.Parallel()
	var g gate
	require.NoError(t, g.enter(context.Background(), false))
	cctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- g.enter(cctx, true) }()
	require.Eventually(t, func() bool { u, _ := g.waiting(); return u == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	u, n := g.waiting()
	require.Zero(t, u+n)
	next := make(chan error, 1)
	go func() { next <- g.enter(context.Background(), false) }()
	require.Eventually(t, func() bool { _, n := g.waiting(); return n == 1 }, 10*time.Second, time.Millisecond)
	g.leave()
	require.NoError(t, <-next)
	g.leave()
	require.NoError(t, g.enter(context.Background(), false), "the gate is free again")
	g.leave()
}
