package luascript_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/testenv"
)

var incr = luascript.New("#!lua\nreturn redis.call('INCR', KEYS[1])\n")

// requireClosed checks that err is a refusal before sending, not an
// unknown outcome.
func requireClosed(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, luascript.ErrClientClosed)
	var ue *luascript.UnknownError
	require.False(t, errors.As(err, &ue), "refused before sending: known, %v", err)
	require.False(t, errors.Is(err, errUnknown))
}

// requireUnknown checks that err is an unknown outcome.
func requireUnknown(t *testing.T, err error) {
	t.Helper()
	var ue *luascript.UnknownError
	require.ErrorAs(t, err, &ue)
	require.NotErrorIs(t, err, luascript.ErrClientClosed)
}

// TestClosedClient: once a guarded client is found closed, every call
// (a script, one with WAIT on a dedicated connection, a plain command) is
// refused before sending with ErrClientClosed, a known outcome; the call
// that found it closed may have been sent, so it stays unknown.
func TestClosedClient(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	require.NoError(t, err)
	g := luascript.Guard(c)
	require.Same(t, g, luascript.Guard(g), "guarded once")
	key := "t:{" + testenv.UniqueID(t) + "}"
	exec := func() error { return table.Wrap("incr", incr.Exec(ctx, g, []string{key}, nil).Error()) }
	require.NoError(t, exec())

	c.Close()
	requireUnknown(t, exec())
	for range 3 {
		requireClosed(t, exec())
	}
	res, err := incr.ExecWait(ctx, g, []string{key}, nil, 1, 10)
	require.NoError(t, err, "no WAIT was answered")
	requireClosed(t, res.Error())
	requireClosed(t, g.Do(ctx, g.B().Get().Key(key).Build()).Error())
	for _, res := range g.DoMulti(ctx, g.B().Get().Key(key).Build(), g.B().Get().Key(key).Build()) {
		requireClosed(t, res.Error())
	}
	n, err := r.Client.Do(ctx, r.Client.B().Get().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "nothing ran after the close")
}

// TestClosedInFlight: a script sent before the client closed, whose reply
// the close cut short, ran: it is an unknown outcome, never a refusal.
func TestClosedInFlight(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	proxy := testenv.NewProxy(t, r.Addr)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.Addr}, DisableCache: true, PipelineMultiplex: -1})
	require.NoError(t, err)
	g := luascript.Guard(c)
	key := "t:{" + testenv.UniqueID(t) + "}"
	// A context that can end makes rueidis queue the call on its
	// pipeline, where a close answers it ErrClosing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, incr.Exec(ctx, g, []string{key}, nil).Error(), "loaded; the next call is an EVALSHA")

	// The reply is held back past the second a close waits for it.
	proxy.Delay(2500 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- table.Wrap("incr", incr.Exec(ctx, g, []string{key}, nil).Error()) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := r.Client.Do(ctx, r.Client.B().Get().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		if n == 2 {
			break // the script ran; its reply is on its way
		}
		require.True(t, time.Now().Before(deadline), "the script never ran")
		time.Sleep(time.Millisecond)
	}
	c.Close()
	err = <-done
	require.ErrorIs(t, err, rueidis.ErrClosing, "the close answered the call in flight")
	requireUnknown(t, err)
	requireClosed(t, table.Wrap("incr", incr.Exec(ctx, g, []string{key}, nil).Error()))
}

// closingClient answers ErrClosing, without sending, while closing is
// set, as a client whose connection is being replaced does for a moment;
// it passes PING through unless pingToo is set.
type closingClient struct {
	rueidis.Client
	closing, pingToo atomic.Bool
}

func (c *closingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ping := len(cmd.Commands()) > 0 && cmd.Commands()[0] == "PING"
	if c.closing.Load() && (!ping || c.pingToo.Load()) {
		return rueidis.NewErrorResult(rueidis.ErrClosing)
	}
	return c.Client.Do(ctx, cmd)
}

// TestClosingConnectionIsNotClosedClient: ErrClosing from a client that
// still answers (a connection replaced under a call) stays an unknown
// outcome, call after call; and a client found closed that answers again
// is not closed any more.
func TestClosingConnectionIsNotClosedClient(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	fake := &closingClient{Client: r.Client}
	g := luascript.Guard(fake)
	key := "t:{" + testenv.UniqueID(t) + "}"
	exec := func() error { return table.Wrap("incr", incr.Exec(ctx, g, []string{key}, nil).Error()) }

	fake.closing.Store(true)
	for range 3 {
		requireUnknown(t, exec()) // the probe's PING is answered
	}

	fake.pingToo.Store(true)
	requireUnknown(t, exec())
	requireClosed(t, exec())

	fake.closing.Store(false)
	require.NoError(t, exec(), "the client answers again")
	fake.closing.Store(true)
	fake.pingToo.Store(false)
	requireUnknown(t, exec())
	requireUnknown(t, exec())
}

// TestShut: a guard shut by its owner refuses every call before sending,
// a dedicated connection's too, while the client it guards stays open.
func TestShut(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	g := luascript.Guard(r.Client)
	key := "t:{" + testenv.UniqueID(t) + "}"
	require.NoError(t, incr.Exec(ctx, g, []string{key}, nil).Error())

	luascript.Shut(g)
	requireClosed(t, table.Wrap("incr", incr.Exec(ctx, g, []string{key}, nil).Error()))
	res, err := incr.ExecWait(ctx, g, []string{key}, nil, 1, 10)
	require.NoError(t, err)
	requireClosed(t, res.Error())
	requireClosed(t, luascript.WriteWait(ctx, g, func() rueidis.Completed { return g.B().Incr().Key(key).Build() }, key, 1, 10))
	for _, res := range g.DoMulti(ctx, g.B().Incr().Key(key).Build()) {
		requireClosed(t, res.Error())
	}
	n, err := r.Client.Do(ctx, r.Client.B().Get().Key(key).Build()).AsInt64()
	require.NoError(t, err, "the guarded client is still open")
	require.EqualValues(t, 1, n, "nothing was sent after Shut")
	luascript.Shut(r.Client) // not a guard: nothing happens
	require.NoError(t, r.Client.Do(ctx, r.Client.B().Ping().Build()).Error())
}
