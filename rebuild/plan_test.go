package rebuild

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// tenPackets are packets 1..10 of 100+seq cents.
func tenPackets() []int64 {
	c := make([]int64, 10)
	for i := range c {
		c[i] = int64(101 + i)
	}
	return c
}

func pkt(seq int64) string { return redisstore.FormatPacket(seq, 100+seq) }

func grant(user string, seq int64) ledger.Grant {
	return ledger.Grant{User: user, Seq: seq, Cents: 100 + seq}
}

// userOn returns a user name homed on shard k of shards.
func userOn(t *testing.T, k, shards int, prefix string) string {
	t.Helper()
	for i := 0; ; i++ {
		u := prefix + strconv.Itoa(i)
		if redisstore.HomeShard(u, shards) == k {
			return u
		}
	}
}

// survived is a shard that kept its state: meta counters, pool and
// claims.
func survived(meta map[string]string, pool []int64, claims map[string]int64) *shardReading {
	r := &shardReading{Meta: meta, Claims: map[string]string{}, Applied: map[string]bool{}}
	for _, s := range pool {
		r.Pool = append(r.Pool, pkt(s))
	}
	for u, s := range claims {
		r.Claims[u] = pkt(s)
	}
	return r
}

func gone() *shardReading {
	return &shardReading{Meta: map[string]string{}, Claims: map[string]string{}}
}

// seqsOf lists a shard plan's packets of a list.
func seqsOf(t *testing.T, list []string) []int64 {
	t.Helper()
	out := []int64{}
	for _, p := range list {
		s, _, err := redisstore.ParseClaim(p)
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

func TestPlanOneShard(t *testing.T) {
	t.Parallel()
	meta := func(granted int) map[string]string {
		return map[string]string{"count": "10", "granted_count": strconv.Itoa(granted)}
	}
	for _, tc := range []struct {
		name      string
		ev        evidence
		pool      []int64
		lost      []int64
		claims    int64
		conflicts int
	}{
		{name: "nothing survived, the ledger holds the top three",
			ev:   evidence{grants: []ledger.Grant{grant("a", 10), grant("b", 9), grant("c", 8)}, redis: []*shardReading{gone()}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7}, lost: []int64{}, claims: 3},
		{name: "nothing survived, the grant of 9 never settled",
			ev:   evidence{grants: []ledger.Grant{grant("a", 10), grant("c", 8)}, redis: []*shardReading{gone()}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7}, lost: []int64{9}, claims: 2},
		{name: "nothing survived, nothing granted",
			ev:   evidence{redis: []*shardReading{gone()}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, lost: []int64{}},
		{name: "an old copy survived; 5 was granted and settled after it, so 6 was granted too",
			ev: evidence{grants: []ledger.Grant{grant("a", 10), grant("b", 9), grant("c", 8), grant("d", 7), grant("e", 5)},
				redis: []*shardReading{survived(meta(4), []int64{1, 2, 3, 4, 5, 6}, map[string]int64{"a": 10, "b": 9, "c": 8, "d": 7})}},
			pool: []int64{1, 2, 3, 4}, lost: []int64{6}, claims: 5},
		{name: "the claims were deleted, the pool and counters kept",
			ev:   evidence{grants: []ledger.Grant{grant("a", 10)}, redis: []*shardReading{survived(meta(3), []int64{1, 2, 3, 4, 5, 6, 7}, nil)}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7}, lost: []int64{8, 9}, claims: 1},
		{name: "the pool and claims were deleted, the counters kept",
			ev:   evidence{redis: []*shardReading{survived(meta(2), nil, nil)}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7, 8}, lost: []int64{9, 10}},
		{name: "a failover: the ledger gives 10 to u, the new primary gives it to v and 9 to u",
			ev: evidence{grants: []ledger.Grant{grant("u", 10)},
				redis: []*shardReading{survived(meta(2), []int64{1, 2, 3, 4, 5, 6, 7, 8}, map[string]int64{"v": 10, "u": 9})}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7, 8}, lost: []int64{9}, claims: 1, conflicts: 2},
		{name: "a packet an earlier rebuild found lost stays lost, and proves what lies above it left",
			ev:   evidence{lost: []int64{9}, grants: []ledger.Grant{grant("a", 10)}, redis: []*shardReading{gone()}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7, 8}, lost: []int64{9}, claims: 1},
		{name: "a ledger grant of another amount is kept (money moved) and reported",
			ev:   evidence{grants: []ledger.Grant{{User: "a", Seq: 10, Cents: 5}}, redis: []*shardReading{gone()}},
			pool: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, lost: []int64{}, claims: 1, conflicts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			ev.shards, ev.cents, ev.opened = 1, tenPackets(), noneOpened()
			p, err := makePlan(&ev)
			require.NoError(t, err)
			require.Equal(t, tc.pool, seqsOf(t, p.shards[0].img.Pool))
			require.Equal(t, append([]int64{}, tc.lost...), append([]int64{}, p.lost...))
			require.Equal(t, tc.claims, p.claims)
			require.Equal(t, tc.conflicts, p.nConflicts, "%v", p.conflicts)
			require.EqualValues(t, len(tc.pool), p.pool)
		})
	}
}

// TestPlanSharded: a packet of shard 0's surviving pool granted on shard
// 1 proves that every packet before it was lent away; one granted on its
// own shard that every packet after it was granted.
func TestPlanSharded(t *testing.T) {
	t.Parallel()
	home0, home1 := userOn(t, 0, 2, "z"), userOn(t, 1, 2, "y")
	meta := map[string]string{"base_count": "5", "granted_count": "0"}
	ev := &evidence{
		shards: 2, cents: tenPackets(), opened: noneOpened(),
		grants: []ledger.Grant{grant(home1, 5), grant(home0, 7)},
		redis:  []*shardReading{survived(meta, []int64{1, 3, 5, 7, 9}, nil), gone()},
	}
	p, err := makePlan(ev)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3, 9}, p.lost, "1 and 3 were lent before 5; 9 was granted before 7")
	require.EqualValues(t, 2, p.claims)
	require.EqualValues(t, 5, p.pool, "2, 4, 6, 8, 10: on the lost shard, nothing says they left")
	require.Equal(t, []string{home0, pkt(7)}, p.shards[0].img.Claims)
	require.Equal(t, []string{home1, pkt(5)}, p.shards[1].img.Claims)
	require.Equal(t, []int64{2, 6, 10}, seqsOf(t, p.shards[0].img.Pool), "the pool dealt round the shards in seq order")
	require.Equal(t, []int64{4, 8}, seqsOf(t, p.shards[1].img.Pool))
	require.Equal(t, []int64{1, 3, 9}, seqsOf(t, p.shards[0].img.Lost))
	require.Empty(t, p.shards[0].img.Grants, "the ledger holds both grants")
}

// TestPlanUnknowable: a shard whose counters say it granted more than its
// claims hold, beside a shard that kept nothing, cannot say which
// packets left.
func TestPlanUnknowable(t *testing.T) {
	t.Parallel()
	ev := &evidence{
		shards: 2, cents: tenPackets(),
		redis: []*shardReading{survived(map[string]string{"base_count": "5", "granted_count": "2"}, []int64{1, 3, 5}, nil), gone()},
	}
	_, err := makePlan(ev)
	require.ErrorIs(t, err, ErrUnknowable)
}

// TestPlanToSettle: grants found only in Redis go to the new stream of
// their user's home shard; those in the ledger do not.
func TestPlanToSettle(t *testing.T) {
	t.Parallel()
	r := survived(map[string]string{"count": "10", "granted_count": "2"}, []int64{1, 2, 3, 4, 5, 6, 7, 8}, map[string]int64{"a": 10})
	r.Grants = []redisstore.StreamGrant{{User: "a", Seq: 10, Cents: 110}, {User: "b", Seq: 9, Cents: 109}}
	ev := &evidence{shards: 1, cents: tenPackets(), opened: noneOpened(), grants: []ledger.Grant{grant("a", 10)}, redis: []*shardReading{r}}
	p, err := makePlan(ev)
	require.NoError(t, err)
	require.EqualValues(t, 2, p.claims)
	require.EqualValues(t, 1, p.toSettle)
	require.Equal(t, [][]string{{"b", pkt(9)}}, p.shards[0].img.Grants)
	require.Empty(t, p.lost)
}

// TestPlanToSettleKeepsTime: a grant found only in a surviving grants
// stream goes to the new stream with its time (its old entry's), so the
// ledger records when it was granted, not when it was rebuilt.
func TestPlanToSettleKeepsTime(t *testing.T) {
	t.Parallel()
	r := survived(map[string]string{"count": "10", "granted_count": "1"}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 10}, nil)
	r.Grants = []redisstore.StreamGrant{{EntryID: "1790000000123-0", User: "b", Seq: 9, Cents: 109, At: 1_790_000_000_123}}
	ev := &evidence{shards: 1, cents: tenPackets(), opened: noneOpened(), redis: []*shardReading{r}}
	p, err := makePlan(ev)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"b", "9:109:1790000000123"}}, p.shards[0].img.Grants)
	seq, cents, ms, err := redisstore.ParseStreamPacket(p.shards[0].img.Grants[0][1], 1_800_000_000_000)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 109, 1_790_000_000_123}, []int64{seq, cents, ms})
}

// noneOpened is the frontier of a campaign whose pools opened no block:
// the plans above test the proofs, and quarantine nothing.
func noneOpened() []bool { return make([]bool, 11) }

// TestPlanQuarantine: under the frontier, the packets of opened blocks
// that no record places and no proof shows lost are quarantined (held out
// on the root's lost list, not recorded as lost); packets of blocks never
// opened go back to the pool. Without a frontier every unplaced packet
// may have been popped. Released, they go back to the pool.
func TestPlanQuarantine(t *testing.T) {
	t.Parallel()
	opened := noneOpened()
	for s := 6; s <= 10; s++ {
		opened[s] = true
	}
	for _, tc := range []struct {
		name                  string
		opened                []bool
		release               bool
		pool, held            []int64
		quarantined, released int64
	}{
		{"frontier", opened, false, []int64{1, 2, 3, 4, 5}, []int64{6, 7, 8}, 3, 0},
		{"no frontier", nil, false, []int64{}, []int64{1, 2, 3, 4, 5, 6, 7, 8}, 8, 0},
		{"released", opened, true, []int64{1, 2, 3, 4, 5, 6, 7, 8}, []int64{}, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &evidence{shards: 1, cents: tenPackets(), opened: tc.opened, release: tc.release,
				grants: []ledger.Grant{grant("a", 10), grant("b", 9)}, redis: []*shardReading{gone()}}
			p, err := makePlan(ev)
			require.NoError(t, err)
			require.Equal(t, tc.pool, seqsOf(t, p.shards[0].img.Pool))
			require.Equal(t, tc.held, seqsOf(t, p.shards[0].img.Lost))
			require.Empty(t, p.lost, "quarantined is not lost: a later rebuild decides again")
			require.Equal(t, tc.quarantined, p.quarantined)
			require.Equal(t, tc.released, p.released)
			var cents int64
			for _, s := range tc.held {
				cents += tenPackets()[s-1]
			}
			require.Equal(t, cents, p.quarantinedCents)
			require.EqualValues(t, len(tc.held), p.shards[0].lostCount)
		})
	}
}
