package redisstore

import (
	"context"
	"fmt"
)

// CountRequests adds n to the service-wide request counter of the second
// sec (Unix time) and returns the count after the addition. The counter
// expires a few seconds after its second.
func (s *Store) CountRequests(ctx context.Context, sec, n int64) (int64, error) {
	key := s.ns.GlobalRateKey(sec)
	res := s.c.DoMulti(ctx,
		s.c.B().Incrby().Key(key).Increment(n).Build(),
		s.c.B().Expire().Key(key).Seconds(5).Build(),
	)
	count, err := res[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("count requests: %w", err)
	}
	return count, nil
}
