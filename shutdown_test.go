package hongbao_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

// slowBlocks is a ledger whose block opens, after the first, wait at a
// gate until it opens.
type slowBlocks struct {
	ledger.Ledger
	calls   atomic.Int64
	waiting chan struct{} // one send per open that waits at the gate
	gate    chan struct{} // closed to let them through
	inside  atomic.Int64  // opens running now
}

func (s *slowBlocks) OpenBlock(ctx context.Context, campaign string, b ledger.Block) error {
	s.inside.Add(1)
	defer s.inside.Add(-1)
	if s.calls.Add(1) > 1 {
		s.waiting <- struct{}{}
		<-s.gate
	}
	return s.Ledger.OpenBlock(ctx, campaign, b)
}

// TestShutdown: Shutdown refuses new work at once, waits for the grabs in
// flight and for a block being opened ahead of need (the ledger write of
// a background goroutine), answers them all, and returns only then; after
// it every call is ErrClosed, a create included once the host closed the
// ledger, and a second Shutdown is a no-op.
func TestShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := open.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	led := &slowBlocks{Ledger: l, waiting: make(chan struct{}, 16), gate: make(chan struct{})}
	closeGate := sync.OnceFunc(func() { close(led.gate) })
	t.Cleanup(func() { closeGate(); _ = l.Close() }) // never leave an open waiting
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: led, BlockSize: 4})
	require.NoError(t, err)
	c := create(t, eng, hongbao.Spec{Total: 4000, Count: 40})

	// Grab until a grab hints that the opened block runs low: the next
	// block is then being opened ahead of need, and waits at the gate.
	granted := 0
	for eng.Stats().OpeningAhead == 0 {
		require.Less(t, granted, 4, "no open ahead of need within the first block")
		g, err := eng.Grab(ctx, c.ID, "early-"+strconv.Itoa(granted))
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		granted++
	}
	<-led.waiting

	// A grab past the opened block waits in its batch for the same
	// block. (One: a second one might not have queued yet when Shutdown
	// begins, and be refused.)
	const inFlight = 1
	answers := make(chan error, inFlight)
	for i := range inFlight {
		go func() {
			g, err := eng.Grab(ctx, c.ID, "late-"+strconv.Itoa(i))
			if err == nil && g.Outcome != hongbao.Granted {
				err = &outcomeError{g.Outcome}
			}
			answers <- err
		}()
	}
	<-led.waiting // the batch's own open of the block

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, eng.Shutdown(short), context.DeadlineExceeded, "an open and grabs are in flight")
	start := time.Now()
	_, err = eng.Grab(ctx, c.ID, "after")
	requireClosedErr(t, err)
	require.Less(t, time.Since(start), time.Second, "refused at once, not queued")

	closeGate()
	require.NoError(t, eng.Shutdown(ctx))
	require.Zero(t, led.inside.Load(), "no open runs once Shutdown returned")
	require.Zero(t, eng.Stats().OpeningAhead)
	for range inFlight {
		require.NoError(t, <-answers, "a grab in flight is answered")
	}

	// The host closes the ledger: the engine touches it no more.
	require.NoError(t, l.Close())
	_, err = eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10})
	requireClosedErr(t, err)
	_, err = eng.Create(ctx, hongbao.Spec{Total: 1000, Count: 10})
	requireClosedErr(t, err)
	_, err = eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1000, Quota: 10, PerUserCount: 1})
	requireClosedErr(t, err)
	_, err = eng.Discounts().Reserve(ctx, "d1", "u", "o1", 100)
	requireClosedErr(t, err)
	_, err = eng.Status(ctx, c.ID)
	requireClosedErr(t, err)
	_, err = eng.Held(ctx, c.ID, "early-0")
	requireClosedErr(t, err)
	_, err = eng.CloseCampaign(ctx, c.ID)
	requireClosedErr(t, err)
	require.NoError(t, eng.Shutdown(ctx), "idempotent")

	st, err := testenvEngine(t, r).Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, granted+inFlight, st.GrantedCount, "the grabs in flight were granted, none after")
}

// TestShutdownIdle: an engine with nothing in flight shuts down at once,
// and concurrent Shutdowns all return.
func TestShutdownIdle(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { require.NoError(t, eng.Shutdown(context.Background())) })
	}
	wg.Wait()
	_, err := eng.Grab(context.Background(), "c1", "u1")
	requireClosedErr(t, err)
}

type outcomeError struct{ o hongbao.Outcome }

func (e *outcomeError) Error() string { return "outcome " + string(e.o) }
