package hongbao_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/split"
)

// exampleClient connects to the tests' redis-server. In an application
// this is rueidis.NewClient with your own Redis address.
func exampleClient() rueidis.Client {
	srv, err := testenv.SharedServer()
	if err != nil {
		panic(err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return c
}

// A campaign of three equal packets; a double click returns the same packet.
func Example() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()

	eng, err := hongbao.New(hongbao.Config{Redis: client})
	if err != nil {
		panic(err)
	}
	total, _ := hongbao.ParseCents("30.00")
	c, err := eng.Create(ctx, hongbao.Spec{ID: "example-rain", Total: total, Count: 3, Split: split.Fixed})
	if err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "alice", "bob", "carol", "dave"} {
		g, err := eng.Grab(ctx, c.ID, user)
		if err != nil {
			panic(err)
		}
		fmt.Println(user, g.Outcome, hongbao.FormatCents(g.Cents))
	}
	st, _ := eng.Status(ctx, c.ID)
	fmt.Println(st.State, st.CloseReason, hongbao.FormatCents(st.GrantedCents), "granted")
	// Output:
	// alice granted 10.00
	// alice already_granted 10.00
	// bob granted 10.00
	// carol granted 10.00
	// dave sold_out 0.00
	// closed sold_out 30.00 granted
}

// Errors are sentinels to compare with errors.Is.
func ExampleEngine_Grab_notFound() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	eng, _ := hongbao.New(hongbao.Config{Redis: client})

	_, err := eng.Grab(ctx, "no-such-campaign", "alice")
	fmt.Println(errors.Is(err, hongbao.ErrCampaignNotFound))
	// Output: true
}

func ExampleParseCents() {
	c, err := hongbao.ParseCents("7.10")
	fmt.Println(c, err)
	_, err = hongbao.ParseCents("7.105")
	fmt.Println(err)
	fmt.Println(hongbao.FormatCents(c))
	// Output:
	// 710 <nil>
	// hongbao: invalid amount "7.105": want at most two decimals, as in 12.34
	// 7.10
}

// An operator pauses a rain that is being abused and blocks one user:
// the holder keeps its packet, others wait, the blocked user is refused.
func ExampleEngine_Pause() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()

	eng, err := hongbao.New(hongbao.Config{Redis: client})
	if err != nil {
		panic(err)
	}
	c, err := eng.Create(ctx, hongbao.Spec{ID: "example-pause", Total: 3000, Count: 3, Split: split.Fixed})
	if err != nil {
		panic(err)
	}
	grab := func(user string) {
		g, err := eng.Grab(ctx, c.ID, user)
		if err != nil {
			panic(err)
		}
		fmt.Println(user, g.Outcome)
	}
	grab("alice")
	st, _ := eng.Pause(ctx, c.ID)
	fmt.Println("paused:", st.Paused)
	grab("alice")
	grab("bob")
	if _, err := eng.Block(ctx, c.ID, []string{"mallory"}); err != nil {
		panic(err)
	}
	st, _ = eng.Resume(ctx, c.ID)
	fmt.Println("paused:", st.Paused)
	grab("bob")
	grab("mallory")
	// Output:
	// alice granted
	// paused: true
	// alice already_granted
	// bob paused
	// paused: false
	// bob granted
	// mallory blocked
}

// The README's library example, line for line (TestReadmeExample holds
// them alike): a ledger records every packet before a campaign goes live,
// so a campaign Redis loses can be rebuilt; the engine shuts down before
// the ledger and Redis close.
func Example_ledger() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "hongbao-example")
	check(err)
	defer os.RemoveAll(dir)
	srv, err := testenv.SharedServer()
	check(err)

	// README: client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	check(err)
	// README: led, err := open.Open(ctx, "sqlite:ledger.db")
	led, err := open.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	check(err)
	eng, err := hongbao.New(hongbao.Config{Redis: client, Packets: led})
	check(err)
	defer func() { eng.Shutdown(ctx); led.Close(); client.Close() }() // in this order

	total, _ := hongbao.ParseCents("100.00")
	c, err := eng.Create(ctx, hongbao.Spec{Total: total, Count: 50})
	check(err)
	g, err := eng.Grab(ctx, c.ID, "user-42")
	check(err)
	fmt.Println(g.Outcome)
	g, err = eng.Held(ctx, c.ID, "user-42")
	check(err)
	fmt.Println(g.Outcome)
	st, err := eng.Status(ctx, c.ID)
	check(err)
	fmt.Println(st.State, st.GrantedCount, st.RemainingCount)
	st, err = eng.Pause(ctx, c.ID)
	check(err)
	fmt.Println("paused:", st.Paused)
	st, err = eng.CloseCampaign(ctx, c.ID)
	check(err)
	fmt.Println(st.State, st.CloseReason)
	a, err := eng.Audit(ctx, c.ID)
	check(err)
	fmt.Println("audit ok:", a.OK())
	packets := 0
	check(led.Packets(ctx, c.ID, func(ledger.Packet) error { packets++; return nil }))
	fmt.Println("packets in the ledger:", packets)
	// Output:
	// granted
	// already_granted
	// open 1 49
	// paused: true
	// closed operator
	// audit ok: true
	// packets in the ledger: 50
}

// check panics on an error: examples have no *testing.T.
func check(err error) {
	if err != nil {
		panic(err)
	}
}

// grantCounter is an observer of an embedder's own: it counts the grants.
// Embedding NopObserver, it implements only what it needs.
type grantCounter struct {
	hongbao.NopObserver
	grants atomic.Int64
}

func (c *grantCounter) ObserveGrab(ev hongbao.GrabEvent) {
	if ev.Err == nil && ev.Grant.Outcome == hongbao.Granted {
		c.grants.Add(1)
	}
}

// Observers hear every grab with its answer and latency; any number of
// them, the scheduler's and the metrics' beside an embedder's own.
func ExampleEngine_Observe() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()

	eng, err := hongbao.New(hongbao.Config{Redis: client})
	if err != nil {
		panic(err)
	}
	counter := &grantCounter{}
	stop := eng.Observe(counter)
	c, err := eng.Create(ctx, hongbao.Spec{Total: 200, Count: 2})
	if err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "alice", "bob", "carol"} {
		if _, err := eng.Grab(ctx, c.ID, user); err != nil {
			panic(err)
		}
	}
	stop() // the observer hears no more; the others still do
	_, _ = eng.Grab(ctx, c.ID, "dave")
	fmt.Println("grants heard:", counter.grants.Load())
	// Output:
	// grants heard: 2
}
