package redisstore

import (
	"context"
	"fmt"
)

// Register adds campaign id to the registry of live campaigns, scored by
// its close time in ms. It is another slot than the campaign's keys, so
// no campaign script may write it: the engine calls it before the
// activation, after it, and on every create that finds the campaign live
// (hongbao's register.go). Registering again only updates the score.
func (s *Store) Register(ctx context.Context, id string, closesAt int64) error {
	err := s.c.Do(ctx, s.c.B().Zadd().Key(s.ns.CampaignsIndex()).ScoreMember().
		ScoreMember(float64(closesAt), id).Build()).Error()
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	return nil
}

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
