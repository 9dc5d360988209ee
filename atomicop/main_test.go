package atomicop_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

// exampleClient is the client the runnable examples use: examples take no
// *testing.T, so TestMain starts a server for them.
var exampleClient rueidis.Client

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if !redisserver.Available("") {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "redis-server is not installed; CI must have it")
			return 1
		}
		// Every test and example here needs Redis; the tests would skip,
		// the examples cannot.
		fmt.Fprintln(os.Stderr, "skipping atomicop: redis-server is not installed")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	srv, err := redisserver.Start(ctx, redisserver.Options{AOF: "off"})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start redis-server for the examples:", err)
		return 1
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		_ = srv.Stop()
		fmt.Fprintln(os.Stderr, "connect to the examples' redis-server:", err)
		return 1
	}
	exampleClient = c
	return testenv.Main(m, c.Close, func() { _ = srv.Stop() })
}

// exampleRedis returns a client of the examples' server, emptied first so an
// example prints the same whatever ran before it.
func exampleRedis() rueidis.Client {
	ctx := context.Background()
	if err := exampleClient.Do(ctx, exampleClient.B().Flushall().Build()).Error(); err != nil {
		panic(err)
	}
	return exampleClient
}

// eventually waits until cond holds, polling, and fails the test at the
// deadline.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		<-tick.C
	}
}
