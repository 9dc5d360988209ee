package atomicop_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hongbao/hongbao/atomicop"
)

// Data that arrives late never overwrites newer data, and ties are stale.
func ExampleVersioned_Update() {
	ctx := context.Background()
	client := exampleRedis() // a rueidis.Client
	v, err := atomicop.NewVersioned(client, nil)
	if err != nil {
		panic(err)
	}
	for _, u := range []atomicop.Update{
		{Key: "dev-42", Version: 1700000000300, Fields: map[string]string{"status": "charging"}},
		{Key: "dev-42", Version: 1700000000100, Fields: map[string]string{"status": "online"}}, // late
		{Key: "dev-42", Version: 1700000000300, Fields: map[string]string{"status": "idle"}},   // a tie
		{Key: "dev-42", Version: 1700000000500, Fields: map[string]string{"status": "offline"}},
	} {
		res, err := v.Update(ctx, u)
		if err != nil {
			panic(err)
		}
		fmt.Printf("version %d: applied=%v stored=%d\n", u.Version, res.Applied, res.Stored)
	}
	rec, _, _ := v.Get(ctx, "dev-42")
	fmt.Println("status:", rec.Fields["status"])

	_, err = v.Update(ctx, atomicop.Update{Key: "dev-42", Version: 1 << 53})
	fmt.Println(errors.Is(err, atomicop.ErrVersionRange))
	// Output:
	// version 1700000000300: applied=true stored=1700000000300
	// version 1700000000100: applied=false stored=1700000000300
	// version 1700000000300: applied=false stored=1700000000300
	// version 1700000000500: applied=true stored=1700000000500
	// status: offline
	// true
}

// A summary of how many devices of a fleet are in each status moves with
// the updates that apply, in the same script, and a batch writes many
// records of one fleet in one call.
func ExampleVersioned_UpdateBatch() {
	ctx := context.Background()
	v, err := atomicop.NewVersioned(exampleRedis(), nil)
	if err != nil {
		panic(err)
	}
	agg := &atomicop.Aggregate{Summary: "by-status", Field: "status"}
	// The hash tag {fleet-7} puts the records and their summary in one slot.
	rs, err := v.UpdateBatch(ctx, []atomicop.Update{
		{Key: "{fleet-7}dev-1", Version: 10, Fields: map[string]string{"status": "online"}, Aggregate: agg},
		{Key: "{fleet-7}dev-2", Version: 10, Fields: map[string]string{"status": "online"}, Aggregate: agg},
		{Key: "{fleet-7}dev-1", Version: 12, Fields: map[string]string{"status": "charging"}, Aggregate: agg},
		{Key: "{fleet-7}dev-2", Version: 9, Fields: map[string]string{"status": "offline"}, Aggregate: agg}, // late
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rs[0].Applied, rs[1].Applied, rs[2].Applied, rs[3].Applied)
	sum, _ := v.Summary(ctx, "{fleet-7}dev-1", "by-status")
	fmt.Println("charging:", sum["charging"], "online:", sum["online"], "offline:", sum["offline"])

	_, err = v.UpdateBatch(ctx, []atomicop.Update{{Key: "{fleet-7}dev-1", Version: 13}, {Key: "{fleet-8}dev-1", Version: 13}})
	fmt.Println(errors.Is(err, atomicop.ErrCrossSlot))
	// Output:
	// true true true false
	// charging: 1 online: 1 offline: 0
	// true
}

// A worker claims a message, pushes it with its id and token, then marks
// it delivered; every later claim answers Delivered.
func ExampleOnce() {
	ctx := context.Background()
	once, err := atomicop.NewOnce(exampleRedis(), nil)
	if err != nil {
		panic(err)
	}
	push := func(id string, token int64) error {
		// The receiver removes duplicates by id; the token tells a late
		// push from a newer one (it is the Redis clock in microseconds,
		// or above the last token when that is later).
		fmt.Printf("push %s (token %v)\n", id, token > 0)
		return nil
	}

	c, err := once.Claim(ctx, "order-1001", 30*time.Second)
	if err != nil {
		panic(err)
	}
	if c.Status == atomicop.Claimed {
		if err := push("order-1001", c.Token); err != nil {
			_ = once.Release(ctx, "order-1001", c.Token) // another worker delivers it
		} else if err := once.Done(ctx, "order-1001", c.Token, 24*time.Hour); err != nil {
			fmt.Println("lost the claim; the receiver may see a duplicate:", err)
		}
	}

	again, _ := once.Claim(ctx, "order-1001", 30*time.Second)
	fmt.Println("second worker:", again.Status)
	// Output:
	// push order-1001 (token true)
	// second worker: delivered
}

// A worker that cannot push hands the message back; the next worker gets a
// larger token, and the first one's token no longer counts.
func ExampleOnce_Release() {
	ctx := context.Background()
	once, err := atomicop.NewOnce(exampleRedis(), nil)
	if err != nil {
		panic(err)
	}
	first, _ := once.Claim(ctx, "order-1002", 30*time.Second)
	fmt.Println("first:", first.Status)
	busy, _ := once.Claim(ctx, "order-1002", 30*time.Second)
	fmt.Println("meanwhile:", busy.Status)

	_ = once.Release(ctx, "order-1002", first.Token) // the push failed
	second, _ := once.Claim(ctx, "order-1002", 30*time.Second)
	fmt.Println("second:", second.Status, "with a larger token:", second.Token > first.Token)

	err = once.Done(ctx, "order-1002", first.Token, time.Hour)
	fmt.Println("stale token:", errors.Is(err, atomicop.ErrNotOwner))
	fmt.Println("owner:", once.Done(ctx, "order-1002", second.Token, time.Hour))
	// Output:
	// first: claimed
	// meanwhile: busy
	// second: claimed with a larger token: true
	// stale token: true
	// owner: <nil>
}
