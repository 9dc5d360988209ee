package leader_test

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/leader"
)

// One process of many runs the work; here there is one process, so it
// is elected at once.
func Example() {
	client := exampleClient // a rueidis.Client of the Redis the processes share
	elected := make(chan leader.Term, 1)
	el, err := leader.New(leader.Config{
		Redis: client,
		Name:  "example-settlement",
		OnElected: func(ctx context.Context, term leader.Term) {
			elected <- term
			// Run the work of the one leader here, until ctx is done:
			// the lease was lost, or the Elector stops.
			<-ctx.Done()
		},
	})
	if err != nil {
		panic(err)
	}
	if err := el.Start(context.Background()); err != nil {
		panic(err)
	}
	term := <-elected
	fmt.Println("leader:", el.IsLeader(), "fencing token > 0:", term.Token > 0)
	el.Stop() // releases the lease: another process takes over at its next try
	fmt.Println("leader after Stop:", el.IsLeader())
	// Output:
	// leader: true fencing token > 0: true
	// leader after Stop: false
}
