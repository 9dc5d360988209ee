package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
)

// TestServeShutdownFinishesInFlightGrab: a grab the server is handling
// when the shutdown starts is answered (granted, and in Redis) after the
// listener has closed. Redis is paused for writes so the grab stays in
// flight until the shutdown has begun; another holder keeps the scheduler
// lease, so the grab is the only write waiting on Redis.
func TestServeShutdownFinishesInFlightGrab(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	ctx := context.Background()
	pauser := testenv.Client(t, fx.redis.Addr)
	other, err := leader.New(leader.Config{Redis: pauser, TTL: time.Hour, Logger: quietLog()})
	require.NoError(t, err)
	require.NoError(t, other.Start(ctx))
	defer other.Stop()
	waitFor(t, "another process to hold the lease", 10*time.Second, other.IsLeader)
	p := startServe(t, fx.args("--lease-ttl", "1h")...)
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"1.00","count":1}`)
	tok := api.userToken(t, "inflight")

	require.NoError(t, pauser.Do(ctx, pauser.B().ClientPause().Timeout(20000).Write().Build()).Error())
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			require.NoError(t, pauser.Do(ctx, pauser.B().ClientUnpause().Build()).Error())
		}
	}
	defer unpause()

	type answer struct {
		code int
		body map[string]any
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, err := http.NewRequest("POST", p.URL+"/v1/campaigns/"+id+"/grab", nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		c := &http.Client{Transport: openapitest.Transport(t, &http.Transport{DisableKeepAlives: true}), Timeout: 30 * time.Second}
		res, err := c.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var m map[string]any
		err = json.NewDecoder(res.Body).Decode(&m)
		answered <- answer{code: res.StatusCode, body: m, err: err}
	}()
	// In flight: the grab's script waits in Redis.
	waitFor(t, "the grab to wait on Redis", 10*time.Second, func() bool {
		info, err := pauser.Do(ctx, pauser.B().Info().Section("clients").Build()).ToString()
		require.NoError(t, err)
		return !strings.Contains(info, "blocked_clients:0\r\n")
	})

	// SIGTERM twice (what cancelling serve's context and closing StopNow
	// are: no --shutdown-delay, this test is about the drain), then wait
	// until the listener is closed: the grab is still waiting on Redis.
	close(p.stopNow)
	p.cancel()
	p.cancel = nil
	addr := strings.TrimPrefix(p.URL, "http://")
	waitFor(t, "the listener to close", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case a := <-answered:
		t.Fatalf("answered while Redis was paused: %+v %v", a, a.err)
	default:
	}
	unpause()

	var a answer
	select {
	case a = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight grab was not answered")
	}
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.code, "%v", a.body)
	require.Equal(t, "granted", a.body["outcome"])
	select {
	case code := <-p.done:
		require.Equal(t, 0, code, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
	claim, err := pauser.Do(ctx, pauser.B().Hget().Key(redisstore.Default.CampaignKeys(id).Claims).Field("inflight").Build()).ToString()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(claim, "1:"), "claim %q", claim)
}
