package testenv

import (
	"math"
	"strconv"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// SlotRange returns the first and last slot of master i of masters, as
// redis-cli --cluster create assigns them: contiguous ranges in master
// order, each about Slots/masters slots, the last ending at slot 16383.
// NewCluster assigns the same ranges when it makes the cluster itself,
// and the shards of a campaign are laid out over them.
func SlotRange(i, masters int) (first, last int) {
	// redis-cli's own arithmetic, in single precision: a cursor that
	// advances by Slots/masters, each range ending at the cursor's next
	// value less one, rounded.
	per := float32(Slots) / float32(masters)
	var cursor float32
	for j := 0; j <= i; j++ {
		last = int(math.Round(float64(cursor + per - 1)))
		if last > Slots || j == masters-1 {
			last = Slots - 1
		}
		last = max(last, first)
		if j < i {
			first = last + 1
			cursor += per
		}
	}
	return first, last
}

// KeySlot returns the hash slot of key as Redis Cluster computes it (and
// CLUSTER KEYSLOT answers): redisstore.KeySlot, the one the shards are
// laid out by, as an int.
func KeySlot(key string) int { return int(redisstore.KeySlot(key)) }

// IDInSlot returns the first id of the form base-0, base-1, ... for which
// key(id) hashes to slot. A test puts its campaign on a chosen slot (and so
// on a chosen master) with it: key is the campaign's key builder.
func IDInSlot(slot int, base string, key func(id string) string) string {
	return findID(base, key, func(s int) bool { return s == slot })
}

// findID returns the first base-n whose key's slot is accepted. Every slot
// is reached within a few hundred thousand tries; the bound only turns a
// predicate that accepts no slot into a panic instead of a hang.
func findID(base string, key func(id string) string, accept func(slot int) bool) string {
	for n := 0; n < 1<<24; n++ {
		id := base + "-" + strconv.Itoa(n)
		if accept(KeySlot(key(id))) {
			return id
		}
	}
	panic("testenv: no id hashes to an accepted slot")
}
