package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client/hongbaov1"
)

// TestGrabPathsAcrossInstances: two instances on one Redis, each user
// grabbed at once through every path (the JSON batch on one, GrabBatch
// and a GrabStream on the other, the user's own Grab), the same users
// in several of them, as a gateway retrying on another instance does:
// each user is told one packet whatever the path, that packet is the one
// the engine holds for them, no packet is told to two users, and the
// packets told add up to the total.
func TestGrabPathsAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := newGatewayServer(t, false), newGatewayServer(t, false)
	const count, nUsers = 60, 90
	id := a.create(t, fmt.Sprintf(`{"total":"30.00","count":%d,"min":"0.01"}`, count))
	ctx := context.Background()
	grpc := b.rpc(t, "grpc")

	var mu sync.Mutex
	told := map[string]string{} // user -> packet id
	cents := map[string]int64{} // packet id -> cents
	tell := func(path, user, packet string, amount int64) {
		if packet == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if p, ok := told[user]; ok && p != packet {
			t.Errorf("%s: user %s told %s, before %s", path, user, packet, p)
		}
		told[user] = packet
		cents[packet] = amount
	}
	pick := func(seed uint64, n int) []string {
		rng := rand.New(rand.NewPCG(seed, 9))
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("x-%d", rng.IntN(nUsers))
		}
		return out
	}
	var wg sync.WaitGroup
	for k := uint64(0); k < 4; k++ {
		wg.Go(func() {
			for _, r := range a.grabs(t, id, pick(k, 40)) {
				tell("json", r.UserID, r.PacketID, r.AmountCents)
			}
		})
		wg.Go(func() {
			res, err := grpc.grabs.GrabBatch(ctx, authed(&hongbaov1.GrabBatchRequest{CampaignId: id, UserIds: pick(k+10, 40)}, string(gatewayKey)))
			if err != nil {
				t.Errorf("GrabBatch: %v", err)
				return
			}
			for _, r := range res.Msg.Results {
				tell("GrabBatch", r.UserId, r.PacketId, r.AmountCents)
			}
		})
		wg.Go(func() {
			for _, u := range pick(k+20, 10) {
				res, err := grpc.grabs.Grab(ctx, authed(&hongbaov1.GrabRequest{CampaignId: id}, token(t, u)))
				if err != nil {
					t.Errorf("Grab %s: %v", u, err)
					return
				}
				tell("Grab", u, res.Msg.PacketId, res.Msg.AmountCents)
			}
		})
	}
	wg.Go(func() {
		st := grpc.grabs.GrabStream(streamContext(t))
		st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
		sent := 0
		for m := uint64(0); m < 5; m++ {
			msg := &hongbaov1.GrabStreamRequest{}
			if m == 0 {
				msg.CampaignId = id
			}
			for _, u := range pick(m+30, 20) {
				sent++
				msg.Grabs = append(msg.Grabs, &hongbaov1.StreamGrab{UserId: u, Ref: uint64(sent)})
			}
			if err := st.Send(msg); err != nil {
				t.Errorf("stream send: %v", err)
				return
			}
		}
		_ = st.CloseRequest()
		got := 0
		for {
			res, err := st.Receive()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("stream: %v", err)
				return
			}
			for _, r := range res.Results {
				got++
				if r.Error != "" {
					t.Errorf("stream grab %d: %s", r.Ref, r.Error)
				}
				tell("GrabStream", r.UserId, r.PacketId, r.AmountCents)
			}
		}
		_ = st.CloseResponse()
		if got != sent {
			t.Errorf("stream: %d results for %d grabs", got, sent)
		}
	})
	wg.Wait()

	owner := map[string]string{}
	var sum int64
	for u, p := range told {
		g, err := a.Engine.Held(ctx, id, u)
		require.NoError(t, err, u)
		require.Equal(t, p, g.PacketID(), u)
		require.Equal(t, cents[p], g.Cents, u)
		require.NotContains(t, owner, p, "packet %s told to %s and %s", p, owner[p], u)
		owner[p] = u
		sum += cents[p]
	}
	st, err := b.Engine.Status(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, len(told), st.GrantedCount, "every packet granted was told to its user")
	require.EqualValues(t, count, st.GrantedCount, "more users than packets: sold out")
	require.EqualValues(t, 3000, sum)
}
