package luascript

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// A closed client. After rueidis.Client.Close every call fails with
// rueidis.ErrClosing, before anything is sent. But ErrClosing alone does
// not say that a call was never sent: a call in flight when the client
// closed, or when its connection was closed under it (a cluster client
// drops the connection of a node that left the slot map, a Sentinel
// client the old primary's), fails with ErrClosing too when the reply is
// cut short, and then the script may have run. So the error alone stays
// an unknown outcome, and Guard tells the two apart by order: once a
// probe sent after a failed call finds the client refusing too, the
// client is known closed, and a call that started after that and fails
// with ErrClosing was refused before it was sent: ErrClientClosed, a
// permanent answer. The call that found the client closed (and any in
// flight with it) stays unknown. Any reply, even an error reply, shows
// the client alive again (the probe met a connection being replaced) and
// ends the closed state.

// ErrClientClosed: the Redis client was found closed before the call
// began; the call was refused without being sent. It never resolves by
// itself: a closed rueidis client stays closed.
var ErrClientClosed = errors.New("the Redis client is closed; nothing was sent")

// probeTimeout bounds the PING that checks whether a client is closed. A
// closed client answers it at once, without a round trip.
const probeTimeout = time.Second

// Guard returns c with calls that fail because c is closed told apart
// from lost replies (see above): Do, DoMulti and the calls of a Dedicate
// connection answer ErrClientClosed for a call refused before sending. A
// guarded client is returned as it is. Its owner may also close it for
// itself alone with Shut, leaving c open.
func Guard(c rueidis.Client) rueidis.Client {
	if g, ok := c.(*guard); ok {
		return g
	}
	return &guard{Client: c}
}

// guard is a client that knows when it was found closed.
type guard struct {
	rueidis.Client
	// shut: Shut was called; every call is refused without touching the
	// client.
	shut atomic.Bool
	// epoch counts the changes of state: odd while the client is known
	// closed. A call reads it when it starts, so that it judges its
	// failure by the state it started in, and changes it only from there
	// (compare-and-swap), never over a newer finding.
	epoch atomic.Uint64
}

// Shut makes every call of c, a client from Guard, fail with
// ErrClientClosed from now on, without sending anything; the client it
// guards stays open for its other users. It does nothing to another
// client.
func Shut(c rueidis.Client) {
	if g, ok := c.(*guard); ok {
		g.shut.Store(true)
	}
}

// refused is the result of a call refused before sending.
var refused = rueidis.NewErrorResult(ErrClientClosed)

func (g *guard) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if g.shut.Load() {
		return refused
	}
	e := g.epoch.Load()
	r := g.Client.Do(ctx, cmd)
	return g.judge(ctx, e, []rueidis.RedisResult{r})[0]
}

func (g *guard) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if g.shut.Load() {
		return refuseAll(len(cmds))
	}
	e := g.epoch.Load()
	return g.judge(ctx, e, g.Client.DoMulti(ctx, cmds...))
}

func (g *guard) Dedicate() (rueidis.DedicatedClient, func()) {
	if g.shut.Load() {
		return &guardedConn{g: g}, func() {} // no connection taken
	}
	dc, release := g.Client.Dedicate()
	return &guardedConn{DedicatedClient: dc, g: g}, release
}

// judge looks at the results of a call that started in epoch e, and
// replaces ErrClosing by ErrClientClosed when the client was known closed
// then.
func (g *guard) judge(ctx context.Context, e uint64, res []rueidis.RedisResult) []rueidis.RedisResult {
	closing := false
	for _, r := range res {
		switch err := r.NonRedisError(); {
		case err == nil:
			if e%2 == 1 {
				g.epoch.CompareAndSwap(e, e+1) // a reply: alive after all
			}
			return res
		case errors.Is(err, rueidis.ErrClosing):
			closing = true
		}
	}
	if !closing {
		return res
	}
	if e%2 == 0 {
		// Maybe sent before the close: unknown. Find out for the calls
		// that follow.
		g.probe(ctx)
		return res
	}
	for i, r := range res {
		if errors.Is(r.NonRedisError(), rueidis.ErrClosing) {
			res[i] = refused
		}
	}
	return res
}

// probe pings the client and records it closed when the ping is refused
// as closing too.
func (g *guard) probe(ctx context.Context) {
	e := g.epoch.Load()
	if e%2 == 1 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	if err := g.Client.Do(ctx, g.Client.B().Ping().Build()).NonRedisError(); errors.Is(err, rueidis.ErrClosing) {
		g.epoch.CompareAndSwap(e, e+1)
	}
}

// refuseAll is n results of calls refused before sending.
func refuseAll(n int) []rueidis.RedisResult {
	res := make([]rueidis.RedisResult, n)
	for i := range res {
		res[i] = refused
	}
	return res
}

// guardedConn is a Dedicate connection of a guard; without a
// DedicatedClient when the guard was shut.
type guardedConn struct {
	rueidis.DedicatedClient
	g *guard
}

func (c *guardedConn) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if c.DedicatedClient == nil || c.g.shut.Load() {
		return refused
	}
	e := c.g.epoch.Load()
	r := c.DedicatedClient.Do(ctx, cmd)
	return c.g.judge(ctx, e, []rueidis.RedisResult{r})[0]
}

func (c *guardedConn) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if c.DedicatedClient == nil || c.g.shut.Load() {
		return refuseAll(len(cmds))
	}
	e := c.g.epoch.Load()
	return c.g.judge(ctx, e, c.DedicatedClient.DoMulti(ctx, cmds...))
}

// Close closes the connection, when one was taken.
func (c *guardedConn) Close() {
	if c.DedicatedClient != nil {
		c.DedicatedClient.Close()
	}
}
