package redisstore

import (
	"context"
	"fmt"
)

// IndexPage lists at most limit members of a campaign index (CampaignsIndex
// or DiscountsIndex of a Namespace) from offset, in close-time order, and the index's
// size: a reader that shows a bounded page reads no more than the page.
func (s *Store) IndexPage(ctx context.Context, index string, offset, limit int) ([]string, int64, error) {
	if offset < 0 || limit < 1 {
		return nil, 0, fmt.Errorf("list %s: offset %d, limit %d", index, offset, limit)
	}
	res := s.c.DoMulti(ctx,
		s.c.B().Zrange().Key(index).Min(fmt.Sprint(offset)).Max(fmt.Sprint(offset+limit-1)).Build(),
		s.c.B().Zcard().Key(index).Build())
	ids, err := res[0].AsStrSlice()
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", index, err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", index, err)
	}
	return ids, n, nil
}
