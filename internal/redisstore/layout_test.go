package redisstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
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
		require.Equal(t, want, KeySlot(key), "key %q", key)
	}
}

func TestShardTagsSpreadOverSlotRanges(t *testing.T) {
	for _, shards := range []int{1, 2, 3, 4, 8, 256} {
		for _, id := range []string{"c1", "rain-2026", "x"} {
			seen := map[int]bool{}
			for k := range shards {
				tag := ShardTag(id, shards, k)
				if k == 0 {
					require.Equal(t, "c:"+id, tag)
				}
				r := rangeOf(KeySlot("{"+tag+"}"), shards)
				require.False(t, seen[r], "shards %d of %s: range %d twice", shards, id, r)
				seen[r] = true
				require.Equal(t, tag, ShardTag(id, shards, k), "stable")
			}
		}
	}
	require.Equal(t, CampaignKeys("c1"), ShardKeys("c1", 1, 0))
}

func TestHomeShardIsStableAndEven(t *testing.T) {
	require.Equal(t, 0, HomeShard("anyone", 1))
	// FNV-1a 32 of "a" is 0xe40c292c.
	require.Equal(t, int(uint32(0xe40c292c)%7), HomeShard("a", 7))
	const shards, users = 8, 80000
	var count [shards]int
	for i := range users {
		count[HomeShard(fmt.Sprintf("u%d", i), shards)]++
	}
	for k, n := range count {
		require.InDelta(t, users/shards, n, users/shards/10, "shard %d", k)
	}
}
