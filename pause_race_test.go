package hongbao_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// racePauses calls pause and resume from many goroutines at once, rounds
// times; after each round every shard must agree with the root: all paused
// and Paused, or none and not Paused (the call that started last wins).
func racePauses(t *testing.T, shards int, call func(paused bool) error, status func() (paused bool, pausedShards int, err error)) {
	t.Helper()
	const rounds, callers = 20, 8
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- call((g+round)%2 == 0)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		paused, n, err := status()
		require.NoError(t, err)
		want := 0
		if paused {
			want = shards
		}
		require.Equal(t, want, n, "round %d: paused %v but %d of %d shards paused", round, paused, n, shards)
	}
}

// TestPauseRaceConverges: pauses and resumes racing on a sharded campaign
// leave every shard as the root says once all have returned.
func TestPauseRaceConverges(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	const shards = 8
	c := create(t, eng, hongbao.Spec{Total: 800_000, Count: 8000, Shards: shards})
	racePauses(t, shards, func(paused bool) error {
		var err error
		if paused {
			_, err = eng.Pause(ctx, c.ID)
		} else {
			_, err = eng.Resume(ctx, c.ID)
		}
		return err
	}, func() (bool, int, error) {
		st, err := eng.Status(ctx, c.ID)
		if err != nil {
			return false, 0, err
		}
		return st.Paused, st.PausedShards, nil
	})
}

// TestDiscountPauseRaceConverges is TestPauseRaceConverges for a discount
// campaign.
func TestDiscountPauseRaceConverges(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	const shards = 8
	d := createDiscount(t, eng, hongbao.DiscountSpec{Budget: 800_000, Quota: 8000, Min: 1, Max: 500, Seed: seed(1), Shards: shards})
	racePauses(t, shards, func(paused bool) error {
		var err error
		if paused {
			_, err = eng.Discounts().Pause(ctx, d.ID)
		} else {
			_, err = eng.Discounts().Resume(ctx, d.ID)
		}
		return err
	}, func() (bool, int, error) {
		st, err := eng.Discounts().Status(ctx, d.ID)
		if err != nil {
			return false, 0, err
		}
		return st.Paused, st.PausedShards, nil
	})
}

// TestPauseLiftsALostCounter: a root whose generation counter was lost (a
// root rebuilt without its meta) hands out generations the other shards
// already hold, which they refuse; the call lifts the counter above them
// and writes every shard again, so it ends whole.
func TestPauseLiftsALostCounter(t *testing.T) {
	t.Parallel()
	eng, r := newEngine(t)
	ctx := context.Background()
	const shards = 4
	c := create(t, eng, hongbao.Spec{Total: 400_000, Count: 4000, Shards: shards})
	for range 3 {
		_, err := eng.Pause(ctx, c.ID)
		require.NoError(t, err)
	}
	root := redisstore.Default.Layout(c.ID, shards)[0].Meta
	require.NoError(t, r.Client.Do(ctx, r.Client.B().Hdel().Key(root).Field("pause_gen", "pause_applied").Build()).Error())

	st, err := eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Zero(t, st.PausedShards, "the others held newer generations: the call lifted the counter and wrote them again")
	st, err = eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, shards, st.PausedShards, "the counter is above every shard's now")
}
