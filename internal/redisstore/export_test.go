package redisstore

// RangeOf is rangeOf, for the external tests (layout_test.go), which
// check the ranges against testenv's, as redis-cli assigns them.
var RangeOf = rangeOf
