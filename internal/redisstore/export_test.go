package redisstore

import "context"

// RangeOf is rangeOf, for the external tests (layout_test.go), which
// check the ranges against testenv's, as redis-cli assigns them.
var RangeOf = rangeOf

// ReserveArgv runs disc_reserve.lua with a raw ARGV, for the tests of
// what the script refuses that Reserve cannot send.
func ReserveArgv(ctx context.Context, s *Store, keys, argv []string, out []DiscountResult) error {
	return s.discountRun(ctx, s.s.discountReserve, WaitReserve, keys, argv, out)
}
