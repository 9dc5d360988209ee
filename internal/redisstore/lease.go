package redisstore

import (
	"context"
	"strconv"
	"time"
)

// HoldLease takes the lease at key for token, or extends it when token
// holds it, for ttl. It reports whether token holds the lease afterwards.
func (s *Store) HoldLease(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	n, err := s.s.leaseHold.Exec(ctx, s.c, []string{key}, []string{token, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	if err != nil {
		return false, resultError("hold lease", err)
	}
	return n == 1, nil
}

// ReleaseLease deletes the lease at key if token holds it.
func (s *Store) ReleaseLease(ctx context.Context, key, token string) error {
	return resultError("release lease", s.s.leaseRelease.Exec(ctx, s.c, []string{key}, []string{token}).Error())
}
