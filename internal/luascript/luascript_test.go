package luascript_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/testenv"
)

var (
	errThing   = errors.New("test: thing refused")
	errUnknown = errors.New("test: outcome unknown")
	table      = luascript.Errors{Codes: map[string]error{"HBTHING": errThing}, Unknown: errUnknown}
)

// fail raises ARGV[1] as an error reply, or a Lua runtime error when
// ARGV[1] is empty, after counting the call in KEYS[1].
const fail = `#!lua
redis.call('INCR', KEYS[1])
if ARGV[1] == '' then
  return redis.call('HGET', KEYS[1], 'x')
end
return redis.error_reply(ARGV[1])
`

// TestWrapKinds: the kinds of error a script call can end in (the
// closed client's in closed_test.go).
func TestWrapKinds(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	s := luascript.New(fail)
	key := "t:{" + testenv.UniqueID(t) + "}"
	run := func(arg string) error {
		t.Helper()
		return table.Wrap("op", s.Exec(ctx, r.Client, []string{key}, []string{arg}).Error())
	}

	err := run("HBTHING the thing is wrong")
	var se *luascript.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "HBTHING", se.Code)
	require.Equal(t, "the thing is wrong", se.Message)
	require.ErrorIs(t, err, errThing)
	require.EqualError(t, err, "op: test: thing refused: the thing is wrong")
	require.False(t, errors.Is(err, errUnknown))

	for _, arg := range []string{"HBOTHER not registered", ""} {
		err := run(arg)
		var re *rueidis.RedisError
		require.ErrorAs(t, err, &re, "a Redis error reply stays one: %q", arg)
		require.False(t, errors.As(err, &se), "not a script error: %q", arg)
		var ue *luascript.UnknownError
		require.False(t, errors.As(err, &ue), "the outcome is known: %q", arg)
		require.False(t, errors.Is(err, errUnknown))
		require.ErrorContains(t, err, "op: redis: ")
	}

	require.NoError(t, table.Wrap("op", nil))
}

// TestLostReplyIsUnknownAndNotRetried: a script whose reply is lost ran
// once (it is never sent again by itself), and the error says the outcome
// is unknown; so does a call on a cancelled context.
func TestLostReplyIsUnknownAndNotRetried(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	c := testenv.OneConnClient(t, proxy.Addr)
	ctx := context.Background()
	incr := luascript.New("#!lua\nreturn redis.call('INCR', KEYS[1])\n")
	key := "t:{" + testenv.UniqueID(t) + "}"
	n, err := incr.Exec(ctx, c, []string{key}, nil).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "loaded; the next call is an EVALSHA")

	proxy.DropNextReply()
	err = table.Wrap("incr", incr.Exec(ctx, c, []string{key}, nil).Error())
	var ue *luascript.UnknownError
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, errUnknown)
	require.ErrorContains(t, err, "incr: outcome unknown: ")
	got, err := r.Client.Do(ctx, r.Client.B().Get().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 2, got, "the lost call ran exactly once")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = table.Wrap("incr", incr.Exec(cancelled, r.Client, []string{key}, nil).Error())
	require.ErrorAs(t, err, &ue)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errUnknown)

	var plain luascript.Errors
	err = plain.Wrap("incr", incr.Exec(cancelled, r.Client, []string{key}, nil).Error())
	require.ErrorAs(t, err, &ue, "an unknown outcome without a package sentinel")
	require.False(t, errors.Is(err, errUnknown))
}

// TestLegacy: New sends the flags line, so Redis enforces it; NewLegacy
// removes it, and every other line keeps its number.
func TestLegacy(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	key := "t:{" + testenv.UniqueID(t) + "}"
	const writes = "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')\n"
	err := luascript.New(writes).Exec(ctx, r.Client, []string{key}, nil).Error()
	require.ErrorContains(t, err, "Write commands are not allowed from read-only scripts")
	require.NoError(t, luascript.NewLegacy(writes).Exec(ctx, r.Client, []string{key}, nil).Error(),
		"without the flags line Redis does not know it is read-only")

	// The runtime error names the line it happened on.
	const broken = "#!lua\nlocal a = 1\nreturn nosuchfunction()\n"
	for _, s := range []*luascript.Script{luascript.New(broken), luascript.NewLegacy(broken)} {
		err := s.Exec(ctx, r.Client, nil, nil).Error()
		require.ErrorContains(t, err, "user_script:3:")
	}

	// A script without a flags line is sent as written.
	const plain = "return 7\n"
	n, err := luascript.NewLegacy(plain).Exec(ctx, r.Client, nil, nil).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	n, err = luascript.NewLegacy("#!lua").Exec(ctx, r.Client, nil, nil).AsInt64()
	require.True(t, rueidis.IsRedisNil(err), "a bare flags line becomes an empty script: %d %v", n, err)
}

// TestExecMulti: one result per exec, in order.
func TestExecMulti(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	add := luascript.New("#!lua\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])\n")
	key := "t:{" + testenv.UniqueID(t) + "}"
	res := add.ExecMulti(ctx, r.Client,
		rueidis.LuaExec{Keys: []string{key}, Args: []string{"1"}},
		rueidis.LuaExec{Keys: []string{key}, Args: []string{"10"}},
		rueidis.LuaExec{Keys: []string{key}, Args: []string{"x"}},
		rueidis.LuaExec{Keys: []string{key}, Args: []string{"100"}},
	)
	require.Len(t, res, 4)
	var got []int64
	for i, want := range []int64{1, 11, 0, 111} {
		n, err := res[i].AsInt64()
		if want == 0 {
			_, isRedis := rueidis.IsRedisErr(err)
			require.True(t, isRedis, "exec %d fails alone: %v", i, err)
			continue
		}
		require.NoError(t, err)
		got = append(got, n)
	}
	require.Equal(t, []int64{1, 11, 111}, got)
}
