package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestLeaseReleasedAtEnd: when run ends, the lease is released even if
// the last renewal did not report success (a renewal cut short by the
// cancellation: Redis holds our token, run believes it lost it), so
// another process need not wait out the TTL. Another holder's lease is
// never touched.
func TestLeaseReleasedAtEnd(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	c := r.Client
	ctx := context.Background()
	l := newLease(c, time.Minute)

	// Our token is in Redis, and run starts with its context already
	// cancelled: its first renewal fails, as one cut short would.
	require.NoError(t, c.Do(ctx, c.B().Set().Key(leaseKey).Value(l.token).Px(time.Minute).Build()).Error())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	l.run(cancelled, func() { t.Error("gained under a cancelled context") }, func() {})
	n, err := c.Do(ctx, c.B().Exists().Key(leaseKey).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "the lease outlived its holder's end")

	// Someone else's lease stays.
	require.NoError(t, c.Do(ctx, c.B().Set().Key(leaseKey).Value("other").Px(time.Minute).Build()).Error())
	l.run(cancelled, func() { t.Error("gained another's lease") }, func() {})
	v, err := c.Do(ctx, c.B().Get().Key(leaseKey).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "other", v)

	// Held and released at the end: onGain, then onLoss, then no key.
	require.NoError(t, c.Do(ctx, c.B().Del().Key(leaseKey).Build()).Error())
	runCtx, stop := context.WithCancel(ctx)
	gained, lost := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(runCtx, func() { close(gained) }, func() { close(lost) })
	}()
	<-gained
	stop()
	<-done
	<-lost
	n, err = c.Do(ctx, c.B().Exists().Key(leaseKey).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n)
}
