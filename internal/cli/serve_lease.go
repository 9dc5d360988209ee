package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// leaseKey is the Redis key of the scheduler lease: the serve process that
// holds it runs settlement, the closes on time and the refunds.
const leaseKey = redisstore.SchedulerLease

// lease is a Redis lease held by one of several processes at a time.
type lease struct {
	store *redisstore.Store
	token string
	ttl   time.Duration
}

func newLease(c rueidis.Client, ttl time.Duration) *lease {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &lease{store: redisstore.New(c), token: hex.EncodeToString(b[:]), ttl: ttl}
}

// tryHold takes or extends the lease; false means another process holds it
// (or Redis could not be asked: then we must act as if we lost it).
func (l *lease) tryHold(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	held, err := l.store.HoldLease(ctx, leaseKey, l.token, l.ttl)
	return err == nil && held
}

func (l *lease) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = l.store.ReleaseLease(ctx, leaseKey, l.token)
}

// run holds the lease while ctx lasts: onGain runs when it is taken,
// onLoss when it is lost or at the end (then the lease is released).
func (l *lease) run(ctx context.Context, onGain, onLoss func()) {
	held := false
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		now := l.tryHold(ctx)
		switch {
		case now && !held:
			onGain()
		case !now && held:
			onLoss()
		}
		held = now
		select {
		case <-ctx.Done():
			if held {
				onLoss()
			}
			// Released whatever the last renewal answered: one cut
			// short by the cancellation reads as a loss here while
			// Redis may still hold our token, and the others would wait
			// out the TTL. The release deletes only our own token.
			l.release(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		}
	}
}
