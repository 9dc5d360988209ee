// Package split decides how a red packet campaign's total is cut into
// packets. It is pure computation: no I/O, no clocks, no global state. The
// caller stores the resulting list (in Redis, where Lua scripts pop from it)
// and never has to compute amounts under contention.
//
// # Money
//
// Every amount is an int64 number of cents, never a float, so sums are exact
// and a split always adds up to the campaign total to the cent.
//
// Totals are capped at [MaxTotal] = 2^53-1 cents. The amounts end up in Lua
// scripts running inside Redis, and Lua 5.1 numbers are IEEE-754 doubles:
// above 2^53 not every integer is representable, so a decrement or a running
// sum could silently round and money would appear or vanish. Below the cap
// every partial sum of a split is itself below the cap, so everything the
// scripts see stays exact. [MaxCount] bounds the memory of one split (8 bytes
// a packet) and the length of the list the scripts pop from.
//
// # Algorithms
//
// [DoubleAverage] (the default) draws packets one after another. Each draw is
// uniform on [min, 2*avg-min], where avg is the remaining amount over the
// remaining packets; the last packet takes what is left. Since no draw can
// much exceed twice the remaining average, amounts stay near the average:
// among 100 packets the largest is typically about 2.3 times it. That is
// the familiar "lucky" red packet.
//
// [LineCut] places count-1 distinct cut points uniformly on a line of length
// total (after reserving the minimum for every packet) and hands out the
// segment lengths. The result is a uniformly random composition of the total,
// so amounts are far more uneven than with DoubleAverage: a few large packets
// and many small ones (among 100 packets the largest is typically about 5
// times the average).
//
// [Fixed] gives every packet the same amount; when the total does not divide
// evenly, the remainder is spread one cent at a time so packets differ by at
// most one cent.
//
// Whatever the algorithm, the drawn list is then shuffled with Fisher-Yates,
// so the order in which people grab packets carries no information about what
// they get: being first, or last, is neither an advantage nor a handicap.
//
// # Discount amounts
//
// [Discounts] draws the amounts of a discount campaign (a budget spent
// over a quota of discounts within [Min, Max]) in three lists: pairs that
// spread amounts evenly over ten bands yet sum to a known constant, a
// tail of Min amounts served last, and the rest by DoubleAverage;
// [DiscountLists.Deal] deals them to the shards of a campaign, each
// shard's tail last. The file discount.go explains the construction.
//
// # Fairness of DoubleAverage
//
// The classic double-average draw is uniform on [min, 2*avg], whose mean is
// avg + min/2: every draw but the last takes a little more than its share,
// and the last packets make up for it by being systematically small. The
// shuffle hides the order, but the shape of the whole split is still skewed
// towards a few larger early amounts and small leftovers, and the skew grows
// as min approaches the average. Drawing on [min, 2*avg-min] instead (with
// the upper end randomised between two neighbouring integers so the mean is
// exact in cents) makes the expected value of every draw exactly the
// remaining average, hence exactly total/count at every position. The tests
// check this statistically, and check that the same test catches the classic
// variant.
//
// A per-packet Max can force a draw to be clamped, which moves its mean; with
// Max set, the per-position means are only approximately equal.
//
// # Seeds are secrets
//
// [Split] is deterministic for a given spec and seed, so an operator can
// recompute a campaign's split for an audit or a dispute. The flip side: the
// seed together with the spec reveals the whole list in grab order, that is,
// which grab wins the largest packet. Treat a seed like a key: create it with
// [NewSeed], keep it server side, never log it or send it to clients.
//
// Replays must not drift: the seed is hashed with SHA-256 under a versioned
// domain string to key a ChaCha8 stream, and bounded draws are done by this
// package rather than by math/rand, so the result depends neither on the
// platform nor on the Go release. A golden test pins exact outputs; any
// change to how splits are drawn needs a new domain string.
package split
