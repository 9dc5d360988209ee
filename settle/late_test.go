package settle_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// recorder is a sink without a ledger to read back, as a host's wallet
// behind a webhook: it records what it is sent, and runs a hook inside
// a write, while the worker is in the middle of its stream pass.
type recorder struct {
	mu        sync.Mutex
	grants    map[string]int64 // user -> cents
	discounts map[string]int64 // user/order -> cents
	refunds   map[string]int64 // campaign -> cents
	onApply   func(users []string)
}

func newRecorder() *recorder {
	return &recorder{grants: map[string]int64{}, discounts: map[string]int64{}, refunds: map[string]int64{}}
}

func (r *recorder) Fund(context.Context, ledger.Campaign) error { return nil }
func (r *recorder) Ping(context.Context) error                  { return nil }

func (r *recorder) ApplyGrants(_ context.Context, _ string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	users := make([]string, len(gs))
	r.mu.Lock()
	for i, g := range gs {
		r.grants[g.User] = g.Cents
		users[i] = g.User
	}
	hook := r.onApply
	r.mu.Unlock()
	if hook != nil {
		hook(users)
	}
	return ledger.ApplyResult{Inserted: len(gs)}, nil
}

func (r *recorder) ApplyDiscounts(_ context.Context, _ string, ds []ledger.Discount) (ledger.DiscountResult, error) {
	users := make([]string, len(ds))
	r.mu.Lock()
	for i, d := range ds {
		r.discounts[d.User+"/"+d.Order] = d.Cents
		users[i] = d.User
	}
	hook := r.onApply
	r.mu.Unlock()
	if hook != nil {
		hook(users)
	}
	return ledger.DiscountResult{Inserted: len(ds)}, nil
}

func (r *recorder) Refund(_ context.Context, campaign string, cents int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refunds[campaign] = cents
	return nil
}

// homedOn returns a user id with prefix homed on shard k of n.
func homedOn(prefix string, k, n int) string {
	for i := 0; ; i++ {
		if u := prefix + strconv.Itoa(i); hongbao.HomeShard(u, n) == k {
			return u
		}
	}
}

// once runs fn the first time a batch holds user.
func once(user string, fn func()) func([]string) {
	var done bool
	return func(users []string) {
		for _, u := range users {
			if u == user && !done {
				done = true
				fn()
			}
		}
	}
}

// TestRefundWaitsForLateGrant: a Close cut short left shard 0 open, and a
// grant lands on it while the worker reads shard 1's stream, after it has
// read shard 0's. The worker finishes the close; the refund must wait
// until shard 0's stream is read again, after the close, and the grant
// delivered: with a sink that has no ledger to cross-check (a webhook)
// nothing else would notice that it was never sent.
func TestRefundWaitsForLateGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const shards = 2
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 100, Shards: shards})
	require.NoError(t, err)
	u0, u1, late := homedOn("a", 0, shards), homedOn("b", 1, shards), homedOn("late", 0, shards)
	told := map[string]int64{}
	for _, u := range []string{u0, u1} {
		g, err := e.eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Granted, g.Outcome)
		told[u] = g.Cents
	}
	// The operator's close stopped after shard 1: shard 0 (the root)
	// still grants.
	_, _, _, err = redisstore.New(e.redis.Client).Close(ctx, redisstore.Default.Layout(c.ID, shards)[1], hongbao.CloseOperator)
	require.NoError(t, err)

	rec := newRecorder()
	rec.onApply = once(u1, func() {
		g, err := e.eng.Grab(ctx, c.ID, late)
		if assert.NoError(t, err) && assert.Equal(t, hongbao.Granted, g.Outcome) {
			told[late] = g.Cents
		}
	})
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: rec, Consumer: "late", Logger: quiet(),
		Only: []string{c.ID}, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)

	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Len(t, told, 3, "the late grab was granted")
	var cents int64
	for _, v := range told {
		cents += v
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, told, rec.grants, "every grant is delivered before the refund")
	require.Equal(t, map[string]int64{c.ID: 10_000 - cents}, rec.refunds)
	require.Equal(t, cents, st.GrantedCents)
}

// TestDiscountRefundWaitsForLateConfirm: a closed discount campaign still
// takes the confirms of its reservations. One lands on shard 0 while the
// worker reads shard 1's confirms, after shard 0's: the refund must wait
// until it is delivered, whatever the sink.
func TestDiscountRefundWaitsForLateConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const shards = 2
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 10_000, Quota: 100,
		Min: 10, Max: 100, Shards: shards, Hold: time.Minute})
	require.NoError(t, err)
	ua, ub := homedOn("a", 0, shards), homedOn("b", 1, shards)
	for _, u := range []string{ua, ub} {
		r, err := e.eng.Discounts().Reserve(ctx, d.ID, u, "o1", 1_000)
		require.NoError(t, err)
		require.Equal(t, hongbao.Reserved, r.Outcome)
	}
	told := map[string]int64{}
	r, err := e.eng.Discounts().Confirm(ctx, d.ID, ub, "o1")
	require.NoError(t, err)
	told[ub+"/o1"] = r.Cents
	_, err = e.eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)

	rec := newRecorder()
	rec.onApply = once(ub, func() {
		r, err := e.eng.Discounts().Confirm(ctx, d.ID, ua, "o1")
		if assert.NoError(t, err) && assert.NotZero(t, r.Cents) {
			told[ua+"/o1"] = r.Cents
		}
	})
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: rec, Consumer: "late", Logger: quiet(),
		Only: []string{d.ID}, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)

	st, err := e.eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateSettled, st.State)
	require.Len(t, told, 2, "the late confirm was taken")
	var cents int64
	for _, v := range told {
		cents += v
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, told, rec.discounts, "every confirmed discount is delivered before the refund")
	require.Equal(t, map[string]int64{ledger.DiscountCampaign(d.ID): 10_000 - cents}, rec.refunds)
}
