package redisstore

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// keyFields are the values of v's exported string fields but Tag: every
// key of a shard.
func keyFields(v any) []string {
	rv := reflect.ValueOf(v)
	var out []string
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Type().Field(i)
		if f.IsExported() && f.Name != "Tag" && f.Type.Kind() == reflect.String {
			out = append(out, rv.Field(i).String())
		}
	}
	return out
}

// TestAllKeys: All lists every key of a shard once, of both kinds (a
// discount shard's Keys view included), and the begin scripts get their
// KEYS in the order their headers give.
func TestAllKeys(t *testing.T) {
	t.Parallel()
	k := Default.ShardKeys("c1", 3, 1)
	require.ElementsMatch(t, keyFields(k), k.All())
	require.Equal(t, []string{k.Meta, k.Staging, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied},
		loadKeys(k.All(), keptByLoad(k)))

	d := Default.DiscountShardKeys("d1", 3, 2)
	require.Subset(t, d.All(), keyFields(d))
	require.Subset(t, d.All(), keyFields(d.Keys()))
	seen := map[string]bool{}
	for _, key := range d.All() {
		require.False(t, seen[key], "%s listed twice", key)
		seen[key] = true
	}
	require.Equal(t, []string{d.Meta, d.Staging, d.Pool, d.Usage, d.Resv, d.Holds, d.Confirms, d.Dead, d.Xfers, d.Applied},
		loadKeys(d.All(), keptByLoad(d.Keys())))
}
