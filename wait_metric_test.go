package hongbao_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestWaitShortfallsCounted: Stats counts the WAITs that fell short, by
// the operation they followed. While the replica keeps up, grabs, Held
// and the discount calls leave every count at 0; once it left, each call
// answered ErrOutcomeUnknown (a pause too) counts one under its own
// operation, and Stats says how many replicas acknowledged the latest
// (none; one for an engine that asked for two). An engine that sends no
// WAIT reports every operation, at 0.
func TestWaitShortfallsCounted(t *testing.T) {
	t.Parallel()
	primary, replica, eng := replicated(t)
	ctx := context.Background()
	c := create(t, eng, hongbao.Spec{Total: 10_000, Count: 100})
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 10_000, Quota: 100,
		Min: 10, Max: 100, Hold: time.Minute})
	require.NoError(t, err)
	// calls makes each call once for user, named by the operation whose
	// WAIT it sends.
	type call struct {
		op  string
		err error
	}
	calls := func(user string) []call {
		_, grab := eng.Grab(ctx, c.ID, user)
		_, held := eng.Held(ctx, c.ID, user)
		_, reserve := eng.Discounts().Reserve(ctx, d.ID, user, "o1", 5_000)
		_, confirm := eng.Discounts().Confirm(ctx, d.ID, user, "o1")
		_, reserve2 := eng.Discounts().Reserve(ctx, d.ID, user, "o2", 5_000)
		_, cancel := eng.Discounts().Cancel(ctx, d.ID, user, "o2")
		return []call{{"grab", grab}, {"held", held}, {"reserve", reserve}, {"confirm", confirm}, {"reserve", reserve2}, {"cancel", cancel}}
	}
	zero := map[string]uint64{"grab": 0, "reserve": 0, "confirm": 0, "cancel": 0, "held": 0, "transfer": 0, "pause": 0, "block": 0}

	for _, k := range calls("ann") {
		require.NoError(t, k.err, k.op)
	}
	st := eng.Stats()
	require.Equal(t, 1, st.WaitReplicas)
	require.Equal(t, zero, st.WaitShort, "the replica keeps up")

	// An engine that asks for two replicas, of which there is one.
	two, err := hongbao.New(hongbao.Config{Redis: primary.Client, WaitReplicas: 2, WaitTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	_, err = two.Grab(ctx, c.ID, "cy")
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown)
	st = two.Stats()
	require.Equal(t, uint64(1), st.WaitShort["grab"])
	require.Equal(t, 2, st.WaitReplicas)
	require.Equal(t, 1, st.WaitLastAcked, "the one replica acknowledged")
	require.Equal(t, zero, eng.Stats().WaitShort, "each engine counts its own")

	leave(t, replica)
	for _, k := range calls("bob") {
		require.ErrorIs(t, k.err, hongbao.ErrOutcomeUnknown, k.op)
	}
	_, err = eng.Pause(ctx, c.ID)
	require.ErrorIs(t, err, hongbao.ErrOutcomeUnknown, "pause")
	want := map[string]uint64{"grab": 1, "reserve": 2, "confirm": 1, "cancel": 1, "held": 1, "transfer": 0, "pause": 1, "block": 0}
	st = eng.Stats()
	require.Equal(t, want, st.WaitShort)
	require.Zero(t, st.WaitLastAcked, "no replica acknowledged")

	plain, err := hongbao.New(hongbao.Config{Redis: replica.Client})
	require.NoError(t, err)
	require.Equal(t, zero, plain.Stats().WaitShort)
	require.Zero(t, plain.Stats().WaitReplicas)
}
