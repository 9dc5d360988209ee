package redisstore

import (
	"context"
	"fmt"
)

// OwnerField is the meta field of a campaign's root that names its owner:
// the identity of the ledger or sink it settles into, written at create
// (Terms.Owner, DiscountMeta.Owner) and changed only by SetOwner. Absent
// on campaigns created before owners were recorded.
const OwnerField = "owner"

// SetOwner runs owner.lua on a campaign's root: the campaign's owner
// becomes to if it is expect now (expect "" claims an unowned campaign),
// recording why when it is not empty. It returns the owner after the call
// and whether it is to: false means another owner holds the campaign and
// nothing was written. ErrNoCampaign for a campaign that does not exist
// or is loading.
func (s *Store) SetOwner(ctx context.Context, root Keys, expect, to, why string) (owner string, ok bool, err error) {
	vals, err := s.s.owner.Exec(ctx, s.c, []string{root.Meta}, []string{expect, to, why}).ToArray()
	if err != nil {
		return "", false, resultError("owner "+root.Tag, err)
	}
	if len(vals) != 2 {
		return "", false, fmt.Errorf("owner %s: reply of %d elements", root.Tag, len(vals))
	}
	done, err := vals[0].AsInt64()
	if err != nil {
		return "", false, fmt.Errorf("owner %s: %w", root.Tag, err)
	}
	owner, err = vals[1].ToString()
	if err != nil {
		return "", false, fmt.Errorf("owner %s: %w", root.Tag, err)
	}
	return owner, done == 1, nil
}
