// Package testenv gives tests real Redis servers.
//
// SharedRedis returns a client of one redis-server shared by a test binary, started
// on first use on a free loopback port; tests stay apart by using unique ids
// (UniqueID) in their keys, so they can run with t.Parallel(). NewRedis starts
// a private server for tests that change server-wide state (SCRIPT FLUSH,
// CLIENT PAUSE, crashes). When redis-server is missing the tests skip, except
// under CI=true, where that is a failure.
//
// # Topologies
//
// NewCluster starts a private Redis Cluster (three masters by default,
// optionally with replicas) and returns once every node agrees on the slots.
// Its Client was given one node's address and found the others itself;
// each Node has a Client of its own that talks to that node alone. A test
// puts a campaign on a chosen master with IDOn (or on a chosen slot with
// IDInSlot and KeySlot), asks where a key lives with MasterOf, kills and
// restarts nodes (KillNode, RestartNode, then WaitConsistent), and moves a
// slot while clients run:
//
//	c := testenv.NewCluster(t, testenv.ClusterOptions{Masters: 2})
//	m, err := c.BeginMigration(ctx, slot, c.Nodes[1].Addr) // slot now split
//	_, err = m.Step(ctx, 50)                                // move 50 keys
//	// ... clients now get ASK and TRYAGAIN; c.Redirects counts them ...
//	err = m.Finish(ctx)                                     // move the rest, hand over
//
// MigrateSlot does all three at once.
//
// NewSentinel starts a master, its replicas and three sentinels tuned to
// fail over within a few seconds. Its URL is the form rueidis.ParseURL
// reads (redis://S1?master_set=NAME&addr=S2&addr=S3) and its Client was
// made from it. A durability test writes, calls WaitReplicated (every
// replica has what the master had), KillMaster, WaitFailover (the new
// master's address), and keeps using the same Client; RestartAsReplica
// brings the old master back.
//
// Every process of a topology runs on loopback in its own temporary data
// directory and stops when the test ends; every wait has a deadline and a
// failure message with the state last seen and the tails of the nodes'
// logs. Cluster nodes get ports below Linux's ephemeral range with their
// bus port (port+10000) free too, so the many parallel topologies of a
// test run do not collide with each other or with outgoing connections.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/hongbao/hongbao/internal/random"
	"github.com/hongbao/hongbao/internal/redisserver"
)

// Redis is a running server and a client connected to it.
type Redis struct {
	Addr   string
	Client rueidis.Client
	Server *redisserver.Server
}

var (
	sharedOnce sync.Once
	shared     *redisserver.Server
	sharedErr  error
)

// Main runs the tests of a package, stops the shared server afterwards,
// and fails a passing run that leaked goroutines (a client not closed, a
// worker not stopped). Use it from TestMain: os.Exit(testenv.Main(m)).
// Cleanups run after the tests, before the leak check.
func Main(m *testing.M, cleanups ...func()) int {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	if shared != nil {
		_ = shared.Stop()
	}
	if code == 0 {
		// rueidis keeps a short-lived timer goroutine after a failed dial
		// (its dial back-off); it ends by itself and holds nothing.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

func need(t testing.TB) {
	t.Helper()
	if !redisserver.Available("") {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI must have it (apt-get install -y redis-server)")
		}
		t.Skip("redis-server is not installed")
	}
}

// SharedRedis returns a client of the shared test server (no persistence, for
// speed). The client is closed when the test ends.
func SharedRedis(t testing.TB) *Redis {
	t.Helper()
	need(t)
	srv, err := SharedServer()
	if err != nil {
		t.Fatalf("start shared redis-server: %v", err)
	}
	return &Redis{Addr: srv.Addr, Client: Client(t, srv.Addr), Server: srv}
}

// SharedServer starts the shared server on first use. It is for code that
// has no testing.TB (runnable examples); tests use SharedRedis.
func SharedServer() (*redisserver.Server, error) {
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared, sharedErr = redisserver.Start(ctx, redisserver.Options{AOF: "off"})
	})
	return shared, sharedErr
}

// NewRedis starts a private server for this test, stopped when it ends.
func NewRedis(t testing.TB, opt redisserver.Options) *Redis {
	t.Helper()
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redisserver.Start(ctx, opt)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return &Redis{Addr: srv.Addr, Client: Client(t, srv.Addr), Server: srv}
}

// Client connects to addr; the client is closed when the test ends.
func Client(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{addr},
		DisableCache: true,
	})
	if err != nil {
		t.Fatalf("connect to redis %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// OneConnClient connects to addr over a single connection; the client is
// closed when the test ends. Tests that lose a reply through a Proxy use it:
// a default client dials more connections lazily, and the reply lost could
// be the handshake of one of them instead of the command's.
func OneConnClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		PipelineMultiplex: -1,
	})
	if err != nil {
		t.Fatalf("connect to redis %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// UniqueID returns an id that no other test of this run uses, made of
// characters valid in campaign ids and Redis hash tags.
func UniqueID(t testing.TB) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return strings.Trim(name, "-") + "-" + random.Hex(6)
}
