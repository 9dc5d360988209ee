package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// Slots that Redis itself reports (CLUSTER KEYSLOT) for these keys.
func TestKeySlotMatchesRedis(t *testing.T) {
	for key, want := range map[string]uint16{
		"":                     0,
		"123456789":            12739, // the CRC-16/XMODEM check value 0x31C3, mod 16384
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"foo{{bar}}zap":        4015,
		"foo{bar}{zap}":        5061,
	} {
		require.Equal(t, want, redisstore.KeySlot(key), "key %q", key)
	}
}

func TestShardTagsSpreadOverSlotRanges(t *testing.T) {
	for _, shards := range []int{1, 2, 3, 4, 8, 256} {
		for _, id := range []string{"c1", "rain-2026", "x"} {
			seen := map[int]bool{}
			for k := range shards {
				tag := redisstore.ShardTag(id, shards, k)
				if k == 0 {
					require.Equal(t, "c:"+id, tag)
				}
				r := redisstore.RangeOf(redisstore.KeySlot("{"+tag+"}"), shards)
				require.False(t, seen[r], "shards %d of %s: range %d twice", shards, id, r)
				seen[r] = true
				require.Equal(t, tag, redisstore.ShardTag(id, shards, k), "stable")
			}
		}
	}
	require.Equal(t, redisstore.Default.CampaignKeys("c1"), redisstore.Default.ShardKeys("c1", 1, 0))
}

// TestShardRangesAreRedisCLIs: the S ranges the shards are laid out over
// are the ranges redis-cli --cluster create gives S masters, slot for slot,
// so with as many masters as shards every shard has a master of its own.
func TestShardRangesAreRedisCLIs(t *testing.T) {
	for shards := 1; shards <= redisstore.MaxShards; shards++ {
		for i := range shards {
			first, last := testenv.SlotRange(i, shards)
			for _, slot := range []int{first, last, (first + last) / 2} {
				require.Equal(t, i, redisstore.RangeOf(uint16(slot), shards), "slot %d of %d ranges", slot, shards)
			}
			if first > 0 {
				require.Equal(t, i-1, redisstore.RangeOf(uint16(first-1), shards), "slot %d of %d ranges", first-1, shards)
			}
		}
	}
	// Three masters: 0-5460, 5461-10922, 10923-16383. A campaign whose
	// root sits on slot 5461 gets its other two shards on the first and
	// third masters.
	id := testenv.IDInSlot(5461, "edge", func(id string) string { return redisstore.Default.CampaignKeys(id).Meta })
	var masters []int
	for k := range 3 {
		slot := int(redisstore.KeySlot(redisstore.Default.ShardKeys(id, 3, k).Meta))
		for m := range 3 {
			if first, last := testenv.SlotRange(m, 3); slot >= first && slot <= last {
				masters = append(masters, m)
			}
		}
	}
	require.ElementsMatch(t, []int{0, 1, 2}, masters, "one shard on each master")
}

func TestHomeShardIsStableAndEven(t *testing.T) {
	require.Equal(t, 0, redisstore.HomeShard("anyone", 1))
	// FNV-1a 32 of "a" is 0xe40c292c.
	require.Equal(t, int(uint32(0xe40c292c)%7), redisstore.HomeShard("a", 7))
	const shards, users = 8, 80000
	var count [shards]int
	for i := range users {
		count[redisstore.HomeShard(fmt.Sprintf("u%d", i), shards)]++
	}
	for k, n := range count {
		require.InDelta(t, users/shards, n, users/shards/10, "shard %d", k)
	}
}
