package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestFenceAndRefundNotStarved: while settle processes write batches of a
// campaign back to back, their transactions overlapping, a Fence and then
// a Refund of the campaign still get their turn: they wait for the
// batches in flight, not for the stream of batches to stop.
func TestFenceAndRefundNotStarved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	ls := make([]*Ledger, 3)
	for i := range ls {
		l, err := Open(ctx, dsn)
		require.NoError(t, err)
		defer l.Close()
		ls[i] = l
	}
	require.NoError(t, ls[0].Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 1 << 40}))
	var stop atomic.Bool
	var seq, batches atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				gs := make([]ledger.Grant, 20)
				for i := range gs {
					s := seq.Add(1)
					gs[i] = ledger.Grant{Seq: s, User: fmt.Sprintf("u%d", s), Cents: 1}
				}
				if _, err := ls[w%2].ApplyGrants(ctx, "c", gs); err != nil {
					return // refused after the refund
				}
				batches.Add(1)
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	require.Eventually(t, func() bool { return batches.Load() > 50 }, 10*time.Second, time.Millisecond)

	start, before := time.Now(), batches.Load()
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := ls[2].Fence(fctx, "c")
	cancel()
	require.NoError(t, err, "fence, after %v and %d batches", time.Since(start), batches.Load()-before)
	t.Logf("fence took %v, %d batches committed meanwhile", time.Since(start), batches.Load()-before)

	start, before = time.Now(), batches.Load()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = ls[2].Refund(rctx, "c", 0)
	cancel()
	if !errors.Is(err, ledger.ErrRefused) { // grants outstanding: refused, but answered
		require.NoError(t, err, "refund, after %v and %d batches", time.Since(start), batches.Load()-before)
	}
	t.Logf("refund took %v, %d batches committed meanwhile", time.Since(start), batches.Load()-before)
}
