package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// BenchmarkStoreGrab measures one Store.Grab call, a batch of 16 users who
// already hold their packets, on the shared test Redis: the Go cost of
// running grab.lua and decoding its reply, Redis included. Every call
// answers ALREADY, so the call is the same every time and nothing runs out.
// allocs/op is what a change to how scripts are called must not raise.
func BenchmarkStoreGrab(b *testing.B) {
	r := testenv.SharedRedis(b)
	s := redisstore.New(r.Client)
	ctx := context.Background()
	id := testenv.UniqueID(b)
	const batch = 16
	if _, err := s.Begin(ctx, redisstore.Default.CampaignKeys(id), redisstore.Loader{Token: "tok"}, redisstore.Meta{Terms: &redisstore.Terms{Total: batch * 100, Count: batch}}); err != nil {
		b.Fatal(err)
	}
	amounts := make([]int64, batch)
	for i := range amounts {
		amounts[i] = 100
	}
	if err := s.Load(ctx, redisstore.Default.CampaignKeys(id), "tok", 1, 1, amounts, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Activate(ctx, redisstore.Default.CampaignKeys(id), "tok", 0, 0, 3_600_000); err != nil {
		b.Fatal(err)
	}
	keys := redisstore.GrabKeys(redisstore.Default.CampaignKeys(id))
	users := make([]string, batch)
	for i := range users {
		users[i] = "u" + strconv.Itoa(i)
	}
	out := make([]redisstore.GrabResult, batch)
	if err := s.Grab(ctx, keys, 1, users, out); err != nil || out[0].Outcome != redisstore.Granted {
		b.Fatalf("first grab: %v %v", out[0], err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Grab(ctx, keys, 1, users, out); err != nil {
			b.Fatal(err)
		}
		if out[batch-1].Outcome != redisstore.Already {
			b.Fatalf("outcome %d, want ALREADY", out[batch-1].Outcome)
		}
	}
}
