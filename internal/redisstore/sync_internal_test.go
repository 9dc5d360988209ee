package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSyncKeyOf: the sync key a batch script's follow-up writes is the
// shard's own, in the slot of every key the script touched, for red
// packet shards and discount shards alike.
func TestSyncKeyOf(t *testing.T) {
	t.Parallel()
	for _, k := range append(Default.Layout("camp", 4), Default.CampaignKeys("one")) {
		for _, key := range GrabKeys(k) {
			require.Equal(t, k.Sync, syncKeyOf(key))
			require.Equal(t, KeySlot(key), KeySlot(syncKeyOf(key)))
		}
	}
	for _, k := range Default.DiscountLayout("disc", 3) {
		for _, key := range append(k.ReserveKeys(), append(k.ConfirmKeys(), k.CancelKeys()...)...) {
			require.Equal(t, k.Keys().Sync, syncKeyOf(key))
			require.Equal(t, KeySlot(key), KeySlot(syncKeyOf(key)))
		}
	}
}
