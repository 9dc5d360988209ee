package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// gated is a ledger whose writes wait at a gate: entered says a write
// arrived, and it goes on when release is closed, or fails when its
// context ends first (a database that never answers).
type gated struct {
	ledger.Ledger
	entered chan struct{}
	release chan struct{}
}

func (g *gated) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
		return g.Ledger.ApplyGrants(ctx, c, gs)
	case <-ctx.Done():
		return ledger.ApplyResult{}, ctx.Err()
	}
}

func gatedWorker(t *testing.T, e *env, g *gated, id string, passTimeout time.Duration) *settle.Worker {
	t.Helper()
	w, err := settle.New(settle.Config{
		Redis: e.redis.Client, Ledger: g, Consumer: "gated", Logger: quiet(), Only: []string{id},
		Poll: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, PassTimeout: passTimeout,
		ReadCount: 1000, // every entry in the first read, so one pass writes every grant
	})
	require.NoError(t, err)
	return w
}

// TestHungPassIsCutShort: a pass whose ledger write never returns ends at
// the pass timeout, and the passes after it settle everything once the
// ledger answers again.
func TestHungPassIsCutShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 50})
	require.NoError(t, err)
	granted, _ := rain(t, e.eng, c.ID, 20)
	g := &gated{Ledger: e.l, entered: make(chan struct{}, 1), release: make(chan struct{})}
	w := gatedWorker(t, e, g, c.ID, 100*time.Millisecond)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	<-g.entered
	require.Eventually(t, func() bool { return w.Stats().Failures >= 1 }, 10*time.Second, 5*time.Millisecond,
		"the hung pass was never cut short")
	close(g.release)
	require.Eventually(t, func() bool {
		tot, err := e.l.Totals(ctx, c.ID)
		return err == nil && tot.GrantCount == granted
	}, 10*time.Second, 5*time.Millisecond)
}

// TestStopAfterPassFinishesThePass: StopAfterPass lets the write in flight
// commit instead of cancelling it, and returns once the pass is over;
// Stop cancels it.
func TestStopAfterPassFinishesThePass(t *testing.T) {
	t.Parallel()
	for _, graceful := range []bool{true, false} {
		e := newEnv(t)
		ctx := context.Background()
		c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10000, Count: 50})
		require.NoError(t, err)
		granted, _ := rain(t, e.eng, c.ID, 20)
		g := &gated{Ledger: e.l, entered: make(chan struct{}, 1), release: make(chan struct{})}
		w := gatedWorker(t, e, g, c.ID, time.Minute)
		require.NoError(t, w.Start(ctx))
		<-g.entered
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			if graceful {
				w.StopAfterPass(time.Minute)
			} else {
				w.Stop()
			}
		}()
		if graceful {
			select {
			case <-stopped:
				t.Fatal("StopAfterPass returned with the pass still in flight")
			case <-time.After(50 * time.Millisecond):
			}
			close(g.release)
		}
		<-stopped
		tot, err := e.l.Totals(ctx, c.ID)
		require.NoError(t, err)
		if graceful {
			require.Equal(t, granted, tot.GrantCount, "the write in flight was not let finish")
		} else {
			require.Zero(t, tot.GrantCount, "Stop let the write in flight commit")
		}
	}
}
