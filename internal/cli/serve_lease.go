package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// leaseKey is the Redis key of the scheduler lease: the serve process that
// holds it runs settlement, the closes on time and the refunds.
const leaseKey = "hb:lease:scheduler"

// Take the lease when it is free, or extend it when we hold it.
var leaseAcquire = rueidis.NewLuaScript(`
-- KEYS[1] lease  ARGV[1] holder token  ARGV[2] ttl ms
-- Reply 1 when the caller holds the lease afterwards, else 0.
local key, token, ttl = KEYS[1], ARGV[1], ARGV[2]
local holder = redis.call('GET', key)
if not holder then
  redis.call('SET', key, token, 'PX', ttl)
  return 1
end
if holder == token then
  redis.call('PEXPIRE', key, ttl)
  return 1
end
return 0
`)

// Let go of the lease only if we hold it.
var leaseRelease = rueidis.NewLuaScript(`
-- KEYS[1] lease  ARGV[1] holder token
-- Reply 1 when it was ours and is gone, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// lease is a Redis lease held by one of several processes at a time.
type lease struct {
	c     rueidis.Client
	token string
	ttl   time.Duration
}

func newLease(c rueidis.Client, ttl time.Duration) *lease {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &lease{c: c, token: hex.EncodeToString(b[:]), ttl: ttl}
}

// tryHold takes or extends the lease; false means another process holds it
// (or Redis could not be asked: then we must act as if we lost it).
func (l *lease) tryHold(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	n, err := leaseAcquire.Exec(ctx, l.c, []string{leaseKey}, []string{l.token, strconv.FormatInt(l.ttl.Milliseconds(), 10)}).AsInt64()
	return err == nil && n == 1
}

func (l *lease) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = leaseRelease.Exec(ctx, l.c, []string{leaseKey}, []string{l.token}).Error()
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
