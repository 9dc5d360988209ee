package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/client/hongbaov1"
)

// TestRPCGrabStreamCutThenRetried: a gateway's stream cut while its
// grabs are in flight, the same grabs then sent on a stream to another
// instance: every user is answered there, each the packet the engine
// holds for them, and every packet granted (by the cut stream too) is
// one of those told, none twice.
func TestRPCGrabStreamCutThenRetried(t *testing.T) {
	t.Parallel()
	a, b := newGatewayServer(t, false), newGatewayServer(t, false)
	const users = 600
	id := a.create(t, fmt.Sprintf(`{"total":"%d.00","count":%d}`, users, users))
	msgs := func() []*hongbaov1.GrabStreamRequest {
		var out []*hongbaov1.GrabStreamRequest
		for m := 0; m < 3; m++ {
			msg := &hongbaov1.GrabStreamRequest{}
			if m == 0 {
				msg.CampaignId = id
			}
			for i := m * users / 3; i < (m+1)*users/3; i++ {
				msg.Grabs = append(msg.Grabs, &hongbaov1.StreamGrab{UserId: fmt.Sprintf("c-%d", i), Ref: uint64(i + 1)})
			}
			out = append(out, msg)
		}
		return out
	}
	// The cut stream: its grabs sent, the first answer read, then the
	// connection gone.
	ctx, cancel := context.WithCancel(context.Background())
	st := a.rpc(t, "grpc").grabs.GrabStream(ctx)
	st.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
	for _, m := range msgs() {
		require.NoError(t, st.Send(m))
	}
	_, err := st.Receive()
	require.NoError(t, err)
	cancel()
	_ = st.CloseResponse()

	// The retry, on the other instance.
	st2 := b.rpc(t, "grpc").grabs.GrabStream(streamContext(t))
	st2.RequestHeader().Set("Authorization", "Bearer "+string(gatewayKey))
	for _, m := range msgs() {
		require.NoError(t, st2.Send(m))
	}
	require.NoError(t, st2.CloseRequest())
	told := map[string]*hongbaov1.GrabResult{}
	for {
		res, err := st2.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, r := range res.Results {
			require.Empty(t, r.Error, "ref %d", r.Ref)
			require.Equal(t, fmt.Sprintf("c-%d", r.Ref-1), r.UserId, "a result names the user of its ref")
			require.NotContains(t, told, r.UserId)
			told[r.UserId] = r
		}
	}
	require.Len(t, told, users)
	// Whatever the cut stream's grabs did has ended by the time the
	// engine's count settles.
	ctx2 := context.Background()
	var granted int64
	require.Eventually(t, func() bool {
		s1, err := a.Engine.Status(ctx2, id)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
		s2, err := a.Engine.Status(ctx2, id)
		require.NoError(t, err)
		granted = s2.GrantedCount
		return s1.GrantedCount == s2.GrantedCount
	}, 10*time.Second, 10*time.Millisecond)
	owner := map[string]string{}
	var sum int64
	for u, r := range told {
		require.NotEmpty(t, r.PacketId, "%s: %s", u, r.Outcome)
		g, err := a.Engine.Held(ctx2, id, u)
		require.NoError(t, err, u)
		require.Equal(t, r.PacketId, g.PacketID(), u)
		require.Equal(t, r.AmountCents, g.Cents, u)
		require.NotContains(t, owner, r.PacketId)
		owner[r.PacketId] = u
		sum += r.AmountCents
	}
	require.EqualValues(t, users, granted, "every packet granted is one told")
	require.EqualValues(t, users*100, sum)
}
