package hongbao

import (
	"context"
	"errors"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Dry shards of a discount campaign. A shard whose pool is empty answers
// DRY instead of reserving; the engine then borrows amounts from the
// richest other shard by the red packet campaigns' journaled transfer
// (TakeTransfer, ApplyTransfer, FinishTransfer, each step one script on
// one slot, Recover for what a crash left behind) and asks again: on
// demand, since homes are only statistically even. A transfer takes half
// of the richest pool (at least what the batch needs), from its head: the
// amounts it would serve next, so the lender keeps its tail of small
// amounts for last.
//
// Exhausted is answered only when no amount is left anywhere: every pool
// is empty and no transfer is in flight. Reservations still held may come
// back (cancel, expiry), so the campaign stays open; the settlement worker
// closes it, reason exhausted, once nothing is left and nothing is held.

// serveDry refills dry shard k and asks again for the requests it answered
// DRY, until none is left dry (see serveDry). When nothing is left
// anywhere they are answered EXHAUSTED.
func (d *discounter) serveDry(ctx context.Context, r *route, k int, reqs []redisstore.DiscountCall, out []redisstore.DiscountResult) []error {
	dry := func(o redisstore.DiscountResult) bool { return o.Code == redisstore.DiscountDry }
	exhausted := redisstore.DiscountResult{Code: redisstore.DiscountExhausted}
	refill := func(need int) error { return d.refill(ctx, r, k, need) }
	return serveDry(out, dry, &exhausted, refill, func(idx []int, again []redisstore.DiscountResult) error {
		return d.call(ctx, opReserve, r, k, pick(reqs, idx), again)
	})
}

// refill brings amounts to dry shard k for need requests, from the shard
// with the most, by one transfer. When no other pool has any, it finishes
// the transfers in flight (anyone's: every step is idempotent); when
// there are none either, it is errNothingLeft. nil means: ask again.
func (d *discounter) refill(ctx context.Context, r *route, k, need int) error {
	moved, err := d.store.Borrow(ctx, r.keys, k, need)
	d.borrowed(moved)
	if !errors.Is(err, redisstore.ErrNothingToLend) {
		return err
	}
	lens, err := d.store.PoolLengths(ctx, r.keys)
	if err != nil {
		return err
	}
	for _, n := range lens {
		if n > 0 {
			return nil // a unit came back or moved between our reads
		}
	}
	return errNothingLeft
}
