package redisstore

import (
	"context"
	"math"
	"sort"
	"strconv"
)

// Sharded campaigns. A campaign of S shards keeps its packets, claims and
// grants in S groups of keys, each under a hash tag of its own, so on a
// Redis Cluster the shards spread over slots and so over masters. Shard 0
// is the campaign's root: its tag is the one a one-shard campaign has
// always had, {c:<id>}, and its meta holds the campaign's spec. Shard k >= 1
// has the tag {c:<id>:<k>:<salt>}, where salt is the smallest number that
// puts the tag's slot in the k-th of S equal ranges of the 16384 slots,
// counted on from the range of shard 0's slot. A cluster made by
// `redis-cli --cluster create` gives each master one contiguous range of
// slots, and the S ranges are split as it splits them between S masters
// (slotRanges), so the shards of a campaign land on as many masters as
// they can: with S masters, one shard on each.
// The layout is a pure function of the id and S: any process computes the
// same keys without asking Redis.

// MaxShards is the most shards a campaign may have.
const MaxShards = 256

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// ShardTag returns the hash tag (without braces) of shard k of campaign id
// with shards shards.
func ShardTag(id string, shards, k int) string { return ShardTagOf("c:"+id, shards, k) }

// ShardTagOf returns the hash tag of shard k of shards under the root tag
// root: root itself for shard 0, else "<root>:<k>:<salt>" with the salt
// that puts its slot in the k-th of shards equal ranges of the slot space,
// counted on from the range of root's slot. Other sharded structures (the
// discount campaigns) lay themselves out the same way under their own
// root tag.
func ShardTagOf(root string, shards, k int) string {
	if k == 0 {
		return root
	}
	ranges := newSlotRanges(shards)
	target := (ranges.of(KeySlot(root)) + k) % shards
	prefix := root + ":" + strconv.Itoa(k) + ":"
	buf := make([]byte, 0, len(prefix)+8)
	for salt := 0; ; salt++ {
		buf = strconv.AppendInt(append(buf[:0], prefix...), int64(salt), 10)
		if ranges.of(slotOf(buf)) == target {
			return string(buf)
		}
	}
}

// slotRanges are the first slots of n contiguous ranges of the slot
// space, split exactly as redis-cli --cluster create splits the slots
// between n masters: a cursor advancing by 16384/n in single precision,
// each range ending at the cursor's next value less one, rounded. With as
// many shards as masters, each shard then lands on a master of its own;
// ranges of 16384/n slots rounded down would differ from redis-cli's by a
// slot at some boundaries (slot 5461 of three masters is the second
// master's), putting two shards on one master now and then.
type slotRanges []uint16

func newSlotRanges(n int) slotRanges {
	r := make(slotRanges, n)
	per := float32(clusterSlots) / float32(n)
	var cursor float32
	first := 0
	for i := range r {
		r[i] = uint16(first)
		last := int(math.Round(float64(cursor + per - 1)))
		if last > clusterSlots || i == n-1 {
			last = clusterSlots - 1
		}
		first = max(last, first) + 1
		cursor += per
	}
	return r
}

// of is the range slot is in.
func (r slotRanges) of(slot uint16) int {
	return sort.Search(len(r), func(i int) bool { return r[i] > slot }) - 1
}

// rangeOf is which of shards ranges of the slot space slot is in.
func rangeOf(slot uint16, shards int) int { return newSlotRanges(shards).of(slot) }

// HomeShard is the shard that holds user's claim in a campaign of shards
// shards: the 32-bit FNV-1a hash of the user id, modulo shards. It is
// stable: the same user has the same home in every process and release.
func HomeShard(user string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(user); i++ {
		h ^= uint32(user[i])
		h *= 16777619
	}
	return int(h % uint32(shards))
}

// KeySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of the key's
// hash tag, or of the whole key when it has none, modulo 16384.
func KeySlot(key string) uint16 { return slotOf([]byte(key)) }

func slotOf(key []byte) uint16 {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) % clusterSlots
			}
		}
		break
	}
	return crc16(key) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^c]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// View is a read of every shard of a campaign: its layout and one
// snapshot per shard, the root first. Each snapshot is consistent; the
// set is read in one round trip after the root's, not at one instant.
type View struct {
	ID     string
	Shards []Keys
	Snaps  []Snapshot
}

// Root is the root shard's snapshot: the campaign's spec and state.
func (v *View) Root() Snapshot { return v.Snaps[0] }

// Read reads campaign id: the root first, which says how many shards
// there are, then the others. ErrNoCampaign when the root does not exist.
func (s *Store) Read(ctx context.Context, id string) (*View, error) {
	return s.ReadOf(ctx, RedPacket, id)
}
