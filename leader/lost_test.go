package leader_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
)

// elect runs one election of lease name on c and ends it: an Elector
// starts, takes the lease, and stops, releasing it. It returns the term's
// token.
func elect(t *testing.T, c rueidis.Client, name string) int64 {
	t.Helper()
	terms := make(chan leader.Term, 1)
	e, err := leader.New(leader.Config{Redis: c, Name: name, TTL: time.Minute, RenewEvery: 20 * time.Millisecond, Logger: quiet(),
		OnElected: func(ctx context.Context, term leader.Term) {
			terms <- term
			<-ctx.Done()
		}})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	defer e.Stop()
	select {
	case term := <-terms:
		return term.Token
	case <-time.After(10 * time.Second):
		t.Fatal("not elected within 10s")
		return 0
	}
}

// fenceKey is the counter the tokens of lease name are drawn from, as the
// package documents it.
func fenceKey(name string) string { return leader.DefaultPrefix + "{" + name + "}:fence" }

func get(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// replicate makes replica copy primary through link, and waits until it
// holds every write the primary took so far.
func replicate(t *testing.T, replica, primary *testenv.Redis, link *testenv.Proxy) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := strings.Cut(link.Addr, ":")
	r := replica.Client
	require.NoError(t, r.Do(ctx, r.B().Arbitrary("REPLICAOF").Args(host, port).Build()).Error())
	caughtUp(t, primary)
}

// caughtUp waits until a replica acknowledges a write made now on
// primary, and so every write before it.
func caughtUp(t *testing.T, primary *testenv.Redis) {
	t.Helper()
	ctx := context.Background()
	p := primary.Client
	eventually(t, 30*time.Second, "the replica did not catch up", func() bool {
		res := p.DoMulti(ctx, p.B().Incr().Key("replica-check").Build(), p.B().Wait().Numreplicas(1).Timeout(100).Build())
		n, err := res[1].AsInt64()
		return err == nil && n == 1
	})
}

// TestTokenAboveLostIncrAfterFailover: a primary hands out tokens that its
// replica holds, then one more (an election) that the replica misses: its
// link is cut first. The replica becomes the primary (REPLICAOF NO ONE, as
// a failover does) with a counter behind the last token handed out. The
// next election there still draws a token above every token handed out
// before, the lost one included.
func TestTokenAboveLostIncrAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewRedis(t, redisserver.Options{AOF: "off", Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	link := testenv.NewProxy(t, primary.Addr)
	replicate(t, replica, primary, link)
	name := testenv.UniqueID(t)

	var tokens []int64
	for range 3 {
		tokens = append(tokens, elect(t, primary.Client, name))
	}
	caughtUp(t, primary)
	replicated := get(t, replica.Client, fenceKey(name))
	require.NotEmpty(t, replicated, "the replica holds the counter")

	link.Cut()
	lost := elect(t, primary.Client, name)
	tokens = append(tokens, lost)
	require.Equal(t, replicated, get(t, replica.Client, fenceKey(name)), "the replica missed the last election")

	r := replica.Client
	require.NoError(t, r.Do(ctx, r.B().Arbitrary("REPLICAOF").Args("NO", "ONE").Build()).Error())
	after := elect(t, r, name)
	require.Greater(t, after, slices.Max(tokens), "a token after the failover is above every token before it, %v", tokens)
	again := elect(t, r, name)
	require.Greater(t, again, after, "and tokens go on growing")
}

// TestTokenAboveLostCounter: the counter is gone (FLUSHALL here; a restart
// without persistence or its expiry alike): the next election still draws
// a token above every token handed out before.
func TestTokenAboveLostCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.NewRedis(t, redisserver.Options{AOF: "off"})
	name := testenv.UniqueID(t)
	var tokens []int64
	for range 3 {
		tokens = append(tokens, elect(t, r.Client, name))
	}
	for i := 1; i < len(tokens); i++ {
		require.Greater(t, tokens[i], tokens[i-1])
	}
	require.NoError(t, r.Client.Do(ctx, r.Client.B().Flushall().Build()).Error())
	require.Empty(t, get(t, r.Client, fenceKey(name)))
	after := elect(t, r.Client, name)
	require.Greater(t, after, slices.Max(tokens), "a token after the counter was lost is above every token before it, %v", tokens)
}
