package atomicop_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/atomicop"
	"github.com/hongbao/hongbao/internal/testenv"
)

func newVersioned(t *testing.T) *atomicop.Versioned {
	t.Helper()
	r := testenv.SharedRedis(t)
	v, err := atomicop.NewVersioned(r.Client, &atomicop.VersionedConfig{Prefix: "t:" + testenv.UniqueID(t) + ":"})
	require.NoError(t, err)
	return v
}

func TestVersionedUpdateIfNewer(t *testing.T) {
	t.Parallel()
	type step struct {
		version int64
		fields  map[string]string
		applied bool
		stored  int64
	}
	tests := []struct {
		name  string
		steps []step
		want  atomicop.Record
	}{
		{
			name:  "first write applies",
			steps: []step{{version: 5, fields: map[string]string{"s": "a"}, applied: true, stored: 5}},
			want:  atomicop.Record{Version: 5, Fields: map[string]string{"s": "a"}},
		},
		{
			name: "older data arriving late is stale",
			steps: []step{
				{version: 10, fields: map[string]string{"s": "new"}, applied: true, stored: 10},
				{version: 9, fields: map[string]string{"s": "old"}, applied: false, stored: 10},
			},
			want: atomicop.Record{Version: 10, Fields: map[string]string{"s": "new"}},
		},
		{
			name: "a tie is stale: the first writer of a version wins",
			steps: []step{
				{version: 7, fields: map[string]string{"s": "first"}, applied: true, stored: 7},
				{version: 7, fields: map[string]string{"s": "second"}, applied: false, stored: 7},
			},
			want: atomicop.Record{Version: 7, Fields: map[string]string{"s": "first"}},
		},
		{
			name: "newer data applies and merges fields",
			steps: []step{
				{version: 1, fields: map[string]string{"s": "a", "x": "1"}, applied: true, stored: 1},
				{version: 2, fields: map[string]string{"s": "b"}, applied: true, stored: 2},
			},
			want: atomicop.Record{Version: 2, Fields: map[string]string{"s": "b", "x": "1"}},
		},
		{
			name: "version zero is a version like any other",
			steps: []step{
				{version: 0, fields: map[string]string{"s": "z"}, applied: true, stored: 0},
				{version: 0, fields: map[string]string{"s": "y"}, applied: false, stored: 0},
			},
			want: atomicop.Record{Version: 0, Fields: map[string]string{"s": "z"}},
		},
		{
			name: "no fields only moves the version",
			steps: []step{
				{version: 3, fields: map[string]string{"s": "a"}, applied: true, stored: 3},
				{version: 4, applied: true, stored: 4},
				{version: 2, fields: map[string]string{"s": "late"}, applied: false, stored: 4},
			},
			want: atomicop.Record{Version: 4, Fields: map[string]string{"s": "a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			v := newVersioned(t)
			for i, s := range tt.steps {
				res, err := v.Update(ctx, atomicop.Update{Key: "dev", Version: s.version, Fields: s.fields})
				require.NoError(t, err, "step %d", i)
				require.Equal(t, atomicop.Result{Applied: s.applied, Stored: s.stored}, res, "step %d", i)
			}
			rec, ok, err := v.Get(ctx, "dev")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tt.want, rec)
		})
	}
}

func TestVersionRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version int64
		ok      bool
	}{
		{"zero", 0, true},
		{"2^53 - 1 is the largest", atomicop.MaxVersion, true},
		{"2^53 - 2", atomicop.MaxVersion - 1, true},
		{"2^53 is refused", 1 << 53, false},
		{"2^53 + 1 is refused", 1<<53 + 1, false},
		{"max int64 is refused", math.MaxInt64, false},
		{"negative is refused", -1, false},
		{"min int64 is refused", math.MinInt64, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			v := newVersioned(t)
			res, err := v.Update(ctx, atomicop.Update{Key: "k", Version: tt.version, Fields: map[string]string{"a": "b"}})
			if !tt.ok {
				require.ErrorIs(t, err, atomicop.ErrVersionRange)
				_, found, err := v.Get(ctx, "k")
				require.NoError(t, err)
				require.False(t, found, "nothing is written")
				return
			}
			require.NoError(t, err)
			require.Equal(t, atomicop.Result{Applied: true, Stored: tt.version}, res)
			rec, _, err := v.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, tt.version, rec.Version, "stored exactly")
		})
	}
}

// At the top of the range every neighbour is still told apart: that is
// what the bound buys.
func TestVersionEdgeNeighbours(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newVersioned(t)
	const top = atomicop.MaxVersion
	for _, s := range []struct {
		version int64
		applied bool
	}{
		{top - 2, true},
		{top - 1, true},
		{top - 2, false},
		{top - 1, false}, // a tie at the edge is still a tie
		{top, true},
		{top - 1, false},
		{top, false},
	} {
		res, err := v.Update(ctx, atomicop.Update{Key: "edge", Version: s.version})
		require.NoError(t, err)
		require.Equal(t, s.applied, res.Applied, "version %d", s.version)
	}
	rec, _, err := v.Get(ctx, "edge")
	require.NoError(t, err)
	require.EqualValues(t, top, rec.Version)
}

func TestVersionedInvalidUpdates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		u    atomicop.Update
		want error
	}{
		{"empty key", atomicop.Update{Key: ""}, atomicop.ErrInvalidKey},
		{"closing brace without a tag", atomicop.Update{Key: "a}b"}, atomicop.ErrInvalidKey},
		{"empty tag", atomicop.Update{Key: "{}x"}, atomicop.ErrInvalidKey},
		{"reserved field", atomicop.Update{Key: "k", Fields: map[string]string{atomicop.VersionField: "1"}}, atomicop.ErrReservedField},
		{"counting the version field", atomicop.Update{Key: "k", Aggregate: &atomicop.Aggregate{Summary: "s", Field: atomicop.VersionField}}, atomicop.ErrReservedField},
		{"too many fields", atomicop.Update{Key: "k", Fields: manyFields(atomicop.MaxFields + 1)}, atomicop.ErrBatchSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVersioned(t)
			_, err := v.Update(context.Background(), tt.u)
			require.ErrorIs(t, err, tt.want)
		})
	}
	t.Run("aggregate without a name", func(t *testing.T) {
		t.Parallel()
		v := newVersioned(t)
		_, err := v.Update(context.Background(), atomicop.Update{Key: "k", Aggregate: &atomicop.Aggregate{Field: "s"}})
		require.Error(t, err)
	})
	t.Run("prefix with braces", func(t *testing.T) {
		t.Parallel()
		_, err := atomicop.NewVersioned(nil, &atomicop.VersionedConfig{Prefix: "x{y}:"})
		require.ErrorIs(t, err, atomicop.ErrInvalidKey)
	})
}

func manyFields(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m["f"+strconv.Itoa(i)] = "v"
	}
	return m
}

func TestUpdateAggregate(t *testing.T) {
	t.Parallel()
	agg := &atomicop.Aggregate{Summary: "by-status", Field: "status"}
	type step struct {
		key     string
		version int64
		status  string // "" leaves the field out
		applied bool
		summary map[string]int64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "counts move with applied updates only",
			steps: []step{
				{"{f}a", 1, "online", true, map[string]int64{"online": 1}},
				{"{f}b", 1, "online", true, map[string]int64{"online": 2}},
				{"{f}a", 2, "charging", true, map[string]int64{"online": 1, "charging": 1}},
				{"{f}a", 1, "offline", false, map[string]int64{"online": 1, "charging": 1}},
				{"{f}a", 2, "offline", false, map[string]int64{"online": 1, "charging": 1}},
				{"{f}b", 5, "charging", true, map[string]int64{"charging": 2}},
			},
		},
		{
			name: "an update without the field or with the same value moves nothing",
			steps: []step{
				{"{g}a", 1, "idle", true, map[string]int64{"idle": 1}},
				{"{g}a", 2, "", true, map[string]int64{"idle": 1}},
				{"{g}a", 3, "idle", true, map[string]int64{"idle": 1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			v := newVersioned(t)
			for i, s := range tt.steps {
				fields := map[string]string{"seen": strconv.FormatInt(s.version, 10)}
				if s.status != "" {
					fields["status"] = s.status
				}
				res, err := v.Update(ctx, atomicop.Update{Key: s.key, Version: s.version, Fields: fields, Aggregate: agg})
				require.NoError(t, err, "step %d", i)
				require.Equal(t, s.applied, res.Applied, "step %d", i)
				sum, err := v.Summary(ctx, s.key, agg.Summary)
				require.NoError(t, err)
				require.Equal(t, s.summary, sum, "step %d", i)
			}
		})
	}
}

func TestUpdateBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	agg := &atomicop.Aggregate{Summary: "s", Field: "status"}

	t.Run("applies in order, repeated keys see earlier writes", func(t *testing.T) {
		t.Parallel()
		v := newVersioned(t)
		_, err := v.Update(ctx, atomicop.Update{Key: "{b}y", Version: 50, Fields: map[string]string{"status": "on"}, Aggregate: agg})
		require.NoError(t, err)
		rs, err := v.UpdateBatch(ctx, []atomicop.Update{
			{Key: "{b}x", Version: 10, Fields: map[string]string{"status": "on"}, Aggregate: agg},
			{Key: "{b}x", Version: 12, Fields: map[string]string{"status": "off"}, Aggregate: agg},
			{Key: "{b}x", Version: 11, Fields: map[string]string{"status": "on"}, Aggregate: agg},
			{Key: "{b}y", Version: 40, Fields: map[string]string{"status": "off"}, Aggregate: agg},
			{Key: "{b}z", Version: 1},
		})
		require.NoError(t, err)
		require.Equal(t, []atomicop.Result{
			{Applied: true, Stored: 10},
			{Applied: true, Stored: 12},
			{Applied: false, Stored: 12},
			{Applied: false, Stored: 50},
			{Applied: true, Stored: 1},
		}, rs)
		sum, err := v.Summary(ctx, "{b}any", "s")
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"on": 1, "off": 1}, sum)
	})

	t.Run("keys must share one hash tag", func(t *testing.T) {
		t.Parallel()
		v := newVersioned(t)
		for _, keys := range [][2]string{{"{a}x", "{b}x"}, {"{a}x", "b"}, {"x", "y"}} {
			_, err := v.UpdateBatch(ctx, []atomicop.Update{{Key: keys[0], Version: 1}, {Key: keys[1], Version: 1}})
			require.ErrorIs(t, err, atomicop.ErrCrossSlot, "%v", keys)
		}
		// A key without braces is its own tag, so "a" joins the group {a}.
		_, err := v.UpdateBatch(ctx, []atomicop.Update{{Key: "{a}x", Version: 1}, {Key: "y{a}", Version: 1}, {Key: "a", Version: 1}})
		require.NoError(t, err)
	})

	t.Run("size is bounded", func(t *testing.T) {
		t.Parallel()
		v := newVersioned(t)
		_, err := v.UpdateBatch(ctx, nil)
		require.ErrorIs(t, err, atomicop.ErrBatchSize)
		big := make([]atomicop.Update, atomicop.MaxBatch+1)
		for i := range big {
			big[i] = atomicop.Update{Key: "{t}k", Version: int64(i)}
		}
		_, err = v.UpdateBatch(ctx, big)
		require.ErrorIs(t, err, atomicop.ErrBatchSize)
		rs, err := v.UpdateBatch(ctx, big[:atomicop.MaxBatch])
		require.NoError(t, err)
		require.Len(t, rs, atomicop.MaxBatch)
		require.Equal(t, atomicop.Result{Applied: true, Stored: atomicop.MaxBatch - 1}, rs[atomicop.MaxBatch-1])
	})

	t.Run("one invalid update writes nothing", func(t *testing.T) {
		t.Parallel()
		v := newVersioned(t)
		_, err := v.UpdateBatch(ctx, []atomicop.Update{{Key: "{n}a", Version: 1}, {Key: "{n}b", Version: -5}})
		require.ErrorIs(t, err, atomicop.ErrVersionRange)
		_, found, err := v.Get(ctx, "{n}a")
		require.NoError(t, err)
		require.False(t, found)
	})
}

// Many writers, few keys, versions out of order: every key ends at the
// newest version sent, with that version's fields, and the summary equals
// a recount of the stored records.
func TestUpdateIfNewerConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := newVersioned(t)
	const (
		workers = 64
		keys    = 16
		ops     = 20000
	)
	statuses := []string{"online", "offline", "charging", "idle"}
	agg := &atomicop.Aggregate{Summary: "by-status", Field: "status"}
	rng := rand.New(rand.NewPCG(1, 2))
	type op struct {
		key     int
		version int64
		status  string
	}
	all := make([]op, ops)
	maxSent := make([]int64, keys)
	statusOf := make([]string, keys)
	for i := range all {
		all[i] = op{key: rng.IntN(keys), version: int64(i + 1), status: statuses[rng.IntN(len(statuses))]}
	}
	// Sent out of order: shuffled within windows, on top of the workers'
	// own interleaving.
	for lo := 0; lo < ops; lo += 256 {
		w := all[lo:min(lo+256, ops)]
		rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
	}
	for _, o := range all {
		if o.version > maxSent[o.key] {
			maxSent[o.key], statusOf[o.key] = o.version, o.status
		}
	}
	key := func(k int) string { return fmt.Sprintf("{fleet}dev-%d", k) }
	update := func(o op) atomicop.Update {
		return atomicop.Update{Key: key(o.key), Version: o.version, Aggregate: agg,
			Fields: map[string]string{"status": o.status, "seen": strconv.FormatInt(o.version, 10)}}
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	per := ops / workers
	for w := range workers {
		part := all[w*per : (w+1)*per]
		if w == workers-1 {
			part = all[w*per:]
		}
		wg.Go(func() {
			// Half the workers write one update per call, half in batches.
			if w%2 == 0 {
				for _, o := range part {
					if _, err := v.Update(ctx, update(o)); err != nil {
						errs <- err
						return
					}
				}
				return
			}
			for lo := 0; lo < len(part); lo += 7 {
				batch := make([]atomicop.Update, 0, 7)
				for _, o := range part[lo:min(lo+7, len(part))] {
					batch = append(batch, update(o))
				}
				if _, err := v.UpdateBatch(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recount := map[string]int64{}
	for k := range keys {
		rec, ok, err := v.Get(ctx, key(k))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, maxSent[k], rec.Version, "key %d holds the newest version sent", k)
		require.Equal(t, strconv.FormatInt(maxSent[k], 10), rec.Fields["seen"], "key %d holds the newest fields", k)
		require.Equal(t, statusOf[k], rec.Fields["status"])
		recount[rec.Fields["status"]]++
	}
	sum, err := v.Summary(ctx, key(0), agg.Summary)
	require.NoError(t, err)
	require.Equal(t, recount, sum, "the summary equals a recount")
}

// TestUpdateLostReply: when an update's reply is lost after the script
// ran, the error is ErrOutcomeUnknown, and the retry, stale, shows the
// version the first attempt stored.
func TestUpdateLostReply(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	v, err := atomicop.NewVersioned(testenv.OneConnClient(t, proxy.Addr), &atomicop.VersionedConfig{Prefix: "t:" + testenv.UniqueID(t) + ":"})
	require.NoError(t, err)
	ctx := context.Background()
	// Load the script first, so the call whose reply is lost is the
	// EVALSHA that runs it (not a NOSCRIPT answer).
	_, err = v.Update(ctx, atomicop.Update{Key: "warm-up", Version: 1, Fields: map[string]string{"f": "v"}})
	require.NoError(t, err)

	proxy.DropNextReply()
	u := atomicop.Update{Key: "dev", Version: 7, Fields: map[string]string{"status": "on"}}
	_, err = v.Update(ctx, u)
	require.ErrorIs(t, err, atomicop.ErrOutcomeUnknown)

	res, err := v.Update(ctx, u)
	require.NoError(t, err)
	require.Equal(t, atomicop.Result{Applied: false, Stored: 7}, res, "the lost call applied; the retry is stale")
	rec, ok, err := v.Get(ctx, "dev")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, map[string]string{"status": "on"}, rec.Fields)
}
