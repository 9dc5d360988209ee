// Package testenv gives tests real Redis servers.
//
// SharedRedis returns a client of one redis-server shared by a test binary, started
// on first use on a free loopback port; tests stay apart by using unique ids
// (UniqueID) in their keys, so they can run with t.Parallel(). NewRedis starts
// a private server for tests that change server-wide state (SCRIPT FLUSH,
// CLIENT PAUSE, crashes). When redis-server is missing the tests skip, except
// under CI=true, where that is a failure.
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
