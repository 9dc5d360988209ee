package hongbao_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// pauseKind is one kind of campaign as the pause tests drive it.
type pauseKind struct {
	name string
	// create makes a campaign of shards shards and returns its id.
	create func(t *testing.T, eng *hongbao.Engine, shards int) string
	// pause pauses (or resumes) id and answers the status it returns.
	pause func(eng *hongbao.Engine, id string, paused bool) (pauseState, error)
	// status reads id's status.
	status func(eng *hongbao.Engine, id string) (pauseState, error)
}

// pauseState is what a status says of a pause.
type pauseState struct {
	Paused       bool
	PausedShards int
	Overtaken    bool
}

var pauseKinds = []pauseKind{{
	name: "red packets",
	create: func(t *testing.T, eng *hongbao.Engine, shards int) string {
		return create(t, eng, hongbao.Spec{Total: 100_000 * int64(shards), Count: 1000 * shards, Shards: shards}).ID
	},
	pause: func(eng *hongbao.Engine, id string, paused bool) (pauseState, error) {
		do := eng.Resume
		if paused {
			do = eng.Pause
		}
		st, err := do(context.Background(), id)
		if err != nil {
			return pauseState{}, err
		}
		return pauseState{st.Paused, st.PausedShards, st.Overtaken}, nil
	},
	status: func(eng *hongbao.Engine, id string) (pauseState, error) {
		st, err := eng.Status(context.Background(), id)
		if err != nil {
			return pauseState{}, err
		}
		return pauseState{st.Paused, st.PausedShards, st.Overtaken}, nil
	},
}, {
	name: "discounts",
	create: func(t *testing.T, eng *hongbao.Engine, shards int) string {
		return createDiscount(t, eng, hongbao.DiscountSpec{Budget: 100_000 * int64(shards), Quota: 1000 * shards, Min: 1, Max: 500, Seed: seed(1), Shards: shards}).ID
	},
	pause: func(eng *hongbao.Engine, id string, paused bool) (pauseState, error) {
		do := eng.Discounts().Resume
		if paused {
			do = eng.Discounts().Pause
		}
		st, err := do(context.Background(), id)
		if err != nil {
			return pauseState{}, err
		}
		return pauseState{st.Paused, st.PausedShards, st.Overtaken}, nil
	},
	status: func(eng *hongbao.Engine, id string) (pauseState, error) {
		st, err := eng.Discounts().Status(context.Background(), id)
		if err != nil {
			return pauseState{}, err
		}
		return pauseState{st.Paused, st.PausedShards, st.Overtaken}, nil
	},
}}

// want is the state a call that pauses (resumes) a campaign of shards
// shards leaves.
func want(paused bool, shards int) pauseState {
	if paused {
		return pauseState{Paused: true, PausedShards: shards}
	}
	return pauseState{}
}

// overtaken is want as the answer of a call that a newer one overtook.
func overtaken(paused bool, shards int) pauseState {
	st := want(paused, shards)
	st.Overtaken = true
	return st
}

// TestPauseLastStartedWins: an older Pause or Resume held after it took
// its generation (after it wrote none, one, or all but one of the shards)
// while a newer call of the other direction runs to completion on another
// engine: once both returned, every shard is as the newer call (the one
// that started last) wants, and the older answers that state. The same
// after the root lost its counter (a root rebuilt without its meta).
func TestPauseLastStartedWins(t *testing.T) {
	t.Parallel()
	const shards = 4
	for _, kind := range pauseKinds {
		for _, olderPauses := range []bool{false, true} {
			for _, after := range []int{0, 1, shards - 1} {
				for _, lost := range []bool{false, true} {
					name := fmt.Sprintf("%s/older pauses %v/held after %d writes/lost counter %v", kind.name, olderPauses, after, lost)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						holdOlderPause(t, kind, shards, olderPauses, after, lost)
					})
				}
			}
		}
	}
}

// holdOlderPause runs one case of TestPauseLastStartedWins.
func holdOlderPause(t *testing.T, kind pauseKind, shards int, olderPauses bool, after int, lost bool) {
	newerEng, r := newEngine(t)
	olderEng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	id := kind.create(t, newerEng, shards)
	// The campaign starts as the older call does not want it, three
	// calls in: every shard holds generation 3.
	for _, p := range []bool{olderPauses, !olderPauses, !olderPauses} {
		_, err := kind.pause(newerEng, id, p)
		require.NoError(t, err)
	}
	if lost {
		root := redisstore.Default.Layout(id, shards)[0].Meta
		if kind.name == "discounts" {
			root = redisstore.Default.DiscountShardKeys(id, shards, 0).Keys().Meta
		}
		require.NoError(t, r.Client.Do(ctx, r.Client.B().Hdel().Key(root).Field("pause_gen", "pause_applied").Build()).Error())
	}

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hongbao.SetPauseStep(olderEng, func(written int) {
		if written == after {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	})
	type answer struct {
		st  pauseState
		err error
	}
	older := make(chan answer, 1)
	go func() {
		st, err := kind.pause(olderEng, id, olderPauses)
		older <- answer{st, err}
	}()
	<-held
	st, err := kind.pause(newerEng, id, !olderPauses)
	require.NoError(t, err)
	require.Equal(t, want(!olderPauses, shards), st, "the newer call's answer")
	close(release)
	a := <-older
	require.NoError(t, a.err)
	require.Equal(t, overtaken(!olderPauses, shards), a.st, "the older call answers the campaign as the newer left it, overtaken")
	st, err = kind.status(newerEng, id)
	require.NoError(t, err)
	require.Equal(t, want(!olderPauses, shards), st, "every shard is as the call that started last wants")

	// A new call after both still takes every shard.
	st, err = kind.pause(newerEng, id, olderPauses)
	require.NoError(t, err)
	require.Equal(t, want(olderPauses, shards), st)
}

// TestPauseLostCounterMeetsItsOwnNumber: a root that lost its counter
// hands out again the very generation the other shards hold; a call
// taking it must not mistake the shards' refusal for its own write. It
// takes its generation above the shards', and writes them all.
func TestPauseLostCounterMeetsItsOwnNumber(t *testing.T) {
	t.Parallel()
	const shards = 4
	for _, kind := range pauseKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			eng, r := newEngine(t)
			ctx := context.Background()
			id := kind.create(t, eng, shards)
			_, err := kind.pause(eng, id, true) // generation 1 on every shard
			require.NoError(t, err)
			root := redisstore.Default.Layout(id, shards)[0].Meta
			if kind.name == "discounts" {
				root = redisstore.Default.DiscountShardKeys(id, shards, 0).Keys().Meta
			}
			require.NoError(t, r.Client.Do(ctx, r.Client.B().Hdel().Key(root).Field("pause_gen", "pause_applied").Build()).Error())

			st, err := kind.pause(eng, id, false)
			require.NoError(t, err)
			require.Equal(t, want(false, shards), st)
			st, err = kind.pause(eng, id, true)
			require.NoError(t, err)
			require.Equal(t, want(true, shards), st)
		})
	}
}
