package hongbao

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// MaxBlockedPage is the most users one BlockedPage call answers.
const MaxBlockedPage = 1000

// BlockedPage lists at most limit (1..MaxBlockedPage) of the users
// blocked on campaign id from offset, and how many are blocked in all.
// The pages walk the shards in turn, each shard in the order Redis scans
// its hash, and a page's users are sorted by user id: a campaign that
// blocks no more than limit users answers them all, by user id, in one
// page. Pages read one after the other list every user once while nobody
// is blocked or unblocked; a change between two pages may shift a user
// into the page already read, or repeat one, as with any offset. Unlike
// BlockedUsers it reads no more than the shards before the page (their
// sizes only) and the page: each Redis call is bounded, whatever the
// number of users blocked.
func (e *Engine) BlockedPage(ctx context.Context, id string, offset, limit int) ([]BlockedUser, int, error) {
	return e.blockedPage(ctx, "blocked users", id, kindRedPacket, offset, limit)
}

// BlockedPage is BlockedPage for discount campaign id.
func (ds Discounts) BlockedPage(ctx context.Context, id string, offset, limit int) ([]BlockedUser, int, error) {
	return ds.e.blockedPage(ctx, "discount blocked users", id, kindDiscount, offset, limit)
}

func (e *Engine) blockedPage(ctx context.Context, op, id string, k *kind, offset, limit int) ([]BlockedUser, int, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, 0, err
	}
	if offset < 0 || limit < 1 || limit > MaxBlockedPage {
		return nil, 0, opErr(op, id, fmt.Errorf("offset %d, limit %d: want offset >= 0 and limit 1..%d", offset, limit, MaxBlockedPage))
	}
	shards, err := k.shards(e, ctx, id)
	if err != nil {
		return nil, 0, opErr(op, id, mapStoreErr(err))
	}
	counts, err := e.store.BlockedCounts(ctx, shards)
	if err != nil {
		return nil, 0, opErr(op, id, err)
	}
	total := 0
	for _, n := range counts {
		total += int(n)
	}
	out := []BlockedUser{}
	listed := map[string]bool{} // a scan may read a user twice while the hash is resized
	skip := int64(offset)
	for k := 0; k < len(shards) && len(out) < limit; k++ {
		if skip >= counts[k] {
			skip -= counts[k] // the page starts after this shard: not read
			continue
		}
		for cursor := uint64(0); len(out) < limit; {
			us, next, err := e.store.BlockedScan(ctx, shards[k], cursor)
			if err != nil {
				return nil, 0, opErr(op, id, err)
			}
			for _, u := range us {
				switch {
				case skip > 0:
					skip--
				case len(out) < limit && !listed[u.User]:
					listed[u.User] = true
					out = append(out, BlockedUser{User: u.User, Since: time.UnixMilli(u.Since)})
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out, total, nil
}
