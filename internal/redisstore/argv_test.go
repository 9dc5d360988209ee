package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScriptArgv pins the ARGV each typed call sends, field by field, as
// the scripts read it (and as the engine, the rebuild and settlement built
// it before the calls took typed values): a change here is a change of
// the wire, which a deployed script must accept.
func TestScriptArgv(t *testing.T) {
	t.Parallel()
	terms := &Terms{Total: 1000, Count: 10, Min: 1, Max: 500, Split: "double_average", Seed: 42, Funding: "platform"}
	// The terms in the record's field order (appendTerms); the scripts
	// HSET the pairs, so their order is not part of the wire.
	termsArgv := []string{"funding", "platform", "total", "1000", "count", "10", "min", "1", "max", "500", "split", "double_average", "seed", "42"}
	root := Loader{Token: "tok", Hold: 5 * time.Second}
	shard := Loader{Token: "tok", Epoch: 1_700_000_000_000, Hold: 5 * time.Second} // a shard's hold is the root's
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"one-shard begin", Meta{Terms: terms}.argv(root), cat([]string{"tok", "0", "5000"}, termsArgv)},
		{"one-shard begin, frontier", Meta{Terms: terms, Frontier: &Frontier{Block: 10000, Sealed: 10}}.argv(root),
			cat([]string{"tok", "0", "5000"}, termsArgv, []string{"block", "10000", "sealed", "10"})},
		{"root shard begin", Meta{Share: &ShardShare{Shards: 3, Shard: 0, BaseCount: 4, BaseCents: 400}, Terms: terms}.argv(root),
			cat([]string{"tok", "0", "5000", "shards", "3", "shard", "0", "base_count", "4", "base_cents", "400"}, termsArgv)},
		{"other shard begin", Meta{Share: &ShardShare{Shards: 3, Shard: 2, BaseCount: 3, BaseCents: 300}, Frontier: &Frontier{Block: 100, Sealed: 3}}.argv(shard),
			[]string{"tok", "1700000000000", "0", "shards", "3", "shard", "2", "base_count", "3", "base_cents", "300", "block", "100", "sealed", "3"}},
		{"discount begin", DiscountMeta{Budget: 900, Quota: 9, Min: 100, Max: 100, PerUserCount: 2, PerUserAmount: 150, HoldMs: 60000,
			Funding: "platform", Seed: 7, TailCount: 1, ShardShare: ShardShare{Shards: 3, Shard: 1, BaseCount: 3, BaseCents: 300}}.argv(shard),
			[]string{"tok", "1700000000000", "0", "kind", "discount", "budget", "900", "quota", "9", "min", "100", "max", "100",
				"per_user_count", "2", "per_user_amount", "150", "hold_ms", "60000", "funding", "platform",
				"seed", "7", "tail_count", "1", "shards", "3", "shard", "1", "base_count", "3", "base_cents", "300",
				"comp_cents", "0", "reserved_count", "0", "reserved_cents", "0",
				"confirmed_count", "0", "confirmed_cents", "0", "taken_cents", "0", "returned_cents", "0"}},
		{"rebuild swap", (&RebuiltMeta{Kept: map[string]string{"paused": "1"}, GrantedCount: 2, GrantedCents: 150, LostCount: 1, LostCents: 50,
			OpensAt: 1000, ClosesAt: 2000, CreatedAt: "900", RebuiltAt: 1500, RebuildFrom: "closed", CloseReason: "operator", ClosedAt: 1400,
			Meta: Meta{Share: &ShardShare{Shards: 2, Shard: 0, BaseCount: 5, BaseCents: 500}, Terms: terms, Frontier: &Frontier{Block: 100, Sealed: 2}}}).argv("tok", 3),
			cat([]string{"tok", "3", "paused", "1", "granted_count", "2", "granted_cents", "150", "refunded_cents", "0",
				"lost_count", "1", "lost_cents", "50", "opens_at", "1000", "closes_at", "2000", "created_at", "900",
				"rebuilt_at", "1500", "rebuild_from", "closed", "close_reason", "operator", "closed_at", "1400",
				"block", "100", "sealed", "2", "shards", "2", "shard", "0", "base_count", "5", "base_cents", "500"}, termsArgv)},
		{"rebuild swap, open shard", (&RebuiltMeta{OpensAt: 1000, ClosesAt: 2000, CreatedAt: "900", RebuiltAt: 1500, RebuildFrom: "open"}).argv("tok", 3),
			[]string{"tok", "3", "granted_count", "0", "granted_cents", "0", "refunded_cents", "0",
				"lost_count", "0", "lost_cents", "0", "opens_at", "1000", "closes_at", "2000", "created_at", "900",
				"rebuilt_at", "1500", "rebuild_from", "open"}},
		{"reserve", appendDiscountArgv(nil, 2, []DiscountCall{{User: "a", Order: "o", Cents: 500}, {User: "b", Order: "p", Cents: 7}}, true),
			[]string{"2", "a", "o", "500", "b", "p", "7"}},
		{"confirm, cancel", appendDiscountArgv(nil, 2, []DiscountCall{{User: "a", Order: "o", Cents: 500}, {User: "b", Order: "p"}}, false),
			[]string{"2", "a", "o", "b", "p"}},
		{"dead", deadArgv("1-0", "conflict", []DeadGrant{{User: "u", Packet: "1:2"}}), []string{"1-0", "conflict", "u", "1:2"}},
		{"dead, no grants", deadArgv("1-0", "malformed", nil), []string{"1-0", "malformed"}},
	} {
		require.Equal(t, c.want, c.got, c.name)
	}
	for _, n := range []int{0, 1, 9, 10, 99, 100, MaxShards, MaxShards + 1} {
		require.Equal(t, strconv.Itoa(n), shardsArg(n))
	}
}
