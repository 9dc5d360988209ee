package clienttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/httpapi"
)

// newStreamGateway is a Gateway of svc in stream mode over protocol p,
// with its results and breaks observed; it is closed when the test ends.
func newStreamGateway(t *testing.T, svc *service, p client.Protocol, o client.GatewayOptions) (*client.Gateway, *batches) {
	t.Helper()
	b := &batches{}
	o.Observe, o.Stream = b.observe, true
	gw, err := newClientOver(t, svc, gatewayKey, nil, p).Gateway(o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gw.Close()) })
	return gw, b
}

// breaks is how many broken streams b saw, and the results it saw.
func (b *batches) breaks() (broken, results int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, err := range b.errs {
		if err != nil {
			broken++
		} else {
			results += b.sizes[i]
		}
	}
	return broken, results
}

// grabMany grabs for users gw-<g%half>-<i> from goroutines goroutines,
// perG each (goroutines g and g+half share users), records what each
// user is told, and calls during after each answer, from the answering
// goroutine.
func grabMany(t *testing.T, gw *client.Gateway, id string, goroutines, perG int, k *told) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				user := fmt.Sprintf("gw-%d-%d", g%(goroutines/2), i)
				r, err := gw.Grab(ctx, id, user)
				if !assertNoError(t, err) {
					return
				}
				k.record(t, user, r)
			}
		})
	}
	wg.Wait()
}

// TestGatewayStreamManyUsers: 64 goroutines grab for 40 users each
// through one Gateway's stream, each user by two goroutines, over
// Connect and gRPC: every user told a packet holds exactly it, granted
// once, and no packet is told twice; no stream broke; with MaxBatch 16
// no batch of the service's holds more than the 16 grabs in flight.
func TestGatewayStreamManyUsers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p        client.Protocol
		maxBatch int
	}{{client.Connect, 0}, {client.GRPC, 16}} {
		t.Run(tc.p.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc := newService(t)
			const total, packets = 100_000, 1000
			c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: total, Count: packets})
			require.NoError(t, err)
			gw, obs := newStreamGateway(t, svc, tc.p, client.GatewayOptions{MaxBatch: tc.maxBatch})

			const goroutines, perG = 64, 40
			k := newTold()
			grabMany(t, gw, c.ID, goroutines, perG, k)
			require.False(t, t.Failed())
			require.Len(t, k.packets, packets, "every packet granted")
			k.check(t, svc, c.ID, total)

			broken, results := obs.breaks()
			require.Zero(t, broken)
			require.Equal(t, goroutines*perG, results, "one result a call")
			_, _, biggest := obs.total()
			if tc.maxBatch > 0 {
				require.LessOrEqual(t, biggest, tc.maxBatch, "no more grabs in flight than MaxBatch")
			}
			require.Greater(t, biggest, 1, "grabs that arrived together went together")
			require.Equal(t, 1, svc.fault.count("/GrabStream"), "one stream")
			require.Zero(t, gw.Queued(c.ID))
		})
	}
}

// TestGatewayStreamBroken: the service's connections are cut twice while
// 64 goroutines grab through a stream; the grabs left unanswered go
// again on a new stream, and still every user told a packet holds
// exactly it and no user is told two.
func TestGatewayStreamBroken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	const total, packets = 100_000, 1000
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: total, Count: packets})
	require.NoError(t, err)
	gw, obs := newStreamGateway(t, svc, client.GRPC, client.GatewayOptions{MaxBatch: 64})

	stop := make(chan struct{})
	cut := make(chan int, 2)
	go func() {
		defer close(cut)
		for _, at := range []int{300, 1200} {
			for {
				if _, results := obs.breaks(); results >= at {
					break
				}
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(tick) // polled, as require.Eventually does
			}
			svc.hs.CloseClientConnections()
			cut <- at
		}
	}()
	k := newTold()
	const goroutines, perG = 64, 40
	grabMany(t, gw, c.ID, goroutines, perG, k)
	close(stop)
	n := 0
	for range cut {
		n++
	}
	require.Equal(t, 2, n, "the connections were cut twice during the grabs")
	require.False(t, t.Failed())

	broken, _ := obs.breaks()
	require.Positive(t, broken, "a stream broke")
	require.Greater(t, svc.fault.count("/GrabStream"), 1, "a new stream was opened")
	require.Len(t, k.packets, packets, "every packet granted")
	lost := 0
	for u := range k.packets {
		if k.granted[u] == 0 {
			lost++ // granted by a grab whose result the cut lost
			k.granted[u] = 1
		}
	}
	k.check(t, svc, c.ID, total)
	t.Logf("%d broken streams, %d users answered already_granted for a grant whose result was lost", broken, lost)
}

// heldReads holds what the service reads of the gateway's stream while
// held: the client's messages are sent, and the service does not see them
// until released.
type heldReads struct {
	mu      sync.Mutex
	open    chan struct{} // closed while reads pass
	arrived chan struct{} // a read came back while held
}

func newHeldReads() *heldReads {
	h := &heldReads{arrived: make(chan struct{}, 16), open: make(chan struct{})}
	close(h.open)
	return h
}

func (h *heldReads) hold() {
	h.mu.Lock()
	h.open = make(chan struct{})
	h.mu.Unlock()
}

func (h *heldReads) release() {
	h.mu.Lock()
	close(h.open)
	h.mu.Unlock()
}

type heldBody struct {
	io.ReadCloser
	h *heldReads
}

func (b heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.h.mu.Lock()
	open := b.h.open
	b.h.mu.Unlock()
	select {
	case <-open:
	default:
		select {
		case b.h.arrived <- struct{}{}:
		default:
		}
		<-open
	}
	return n, err
}

// TestGatewayStreamCancel: on a stream with one grab in flight
// (MaxBatch 1), a caller queued behind it that gives up leaves the queue
// and is never grabbed; the caller in flight that gives up hears the
// outcome is unknown, its grab goes on, and the stream goes on for the
// others: one stream, none broken.
func TestGatewayStreamCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	h := newHeldReads()
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if strings.HasSuffix(r.URL.Path, "/GrabStream") {
			r.Body = heldBody{r.Body, h}
		}
		return false
	})
	gw, obs := newStreamGateway(t, svc, client.Connect, client.GatewayOptions{MaxBatch: 1})
	type result struct {
		grab *client.Grab
		err  error
	}
	grab := func(ctx context.Context, user string) chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := gw.Grab(ctx, c.ID, user)
			ch <- result{r, err}
		}()
		return ch
	}

	first, err := gw.Grab(ctx, c.ID, "first")
	require.NoError(t, err)
	require.Equal(t, client.Granted, first.Outcome)

	h.hold()
	annCtx, cancelAnn := context.WithCancel(ctx)
	ann := grab(annCtx, "ann")
	<-h.arrived // ann's grab reached the service, which does not read it yet
	bobCtx, cancelBob := context.WithCancel(ctx)
	bob := grab(bobCtx, "bob")
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 1 }, waitFor, tick, "bob waits: one grab in flight")
	cancelBob()
	b := <-bob
	require.ErrorIs(t, b.err, context.Canceled)
	require.NotErrorIs(t, b.err, client.ErrOutcomeUnknown, "bob was never sent")
	require.Zero(t, gw.Queued(c.ID))

	cal := grab(ctx, "cal")
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 1 }, waitFor, tick)
	cancelAnn()
	a := <-ann
	require.ErrorIs(t, a.err, client.ErrOutcomeUnknown, "ann's grab was sent: its outcome is unknown to ann")
	require.ErrorIs(t, a.err, context.Canceled)
	require.Equal(t, 1, gw.Queued(c.ID), "ann's grab is still in flight: cal waits for its result")
	h.release()
	x := <-cal
	require.NoError(t, x.err, "ann's cancellation did not disturb the stream")
	require.Equal(t, client.Granted, x.grab.Outcome)

	held, err := svc.Engine.Held(ctx, c.ID, "ann")
	require.NoError(t, err, "ann's grab went on")
	_, err = svc.Engine.Held(ctx, c.ID, "bob")
	require.ErrorIs(t, err, hongbao.ErrNoGrant, "bob was never grabbed")
	again, err := gw.Grab(ctx, c.ID, "ann")
	require.NoError(t, err)
	require.Equal(t, client.AlreadyGranted, again.Outcome)
	require.Equal(t, fmt.Sprintf("%s/%d", c.ID, held.Seq), again.PacketID)

	broken, results := obs.breaks()
	require.Zero(t, broken)
	require.Equal(t, 4, results, "first, ann (dropped), cal, ann again")
	require.Equal(t, 1, svc.fault.count("/GrabStream"), "one stream throughout")
}

// TestGatewayStreamRefused: a stream the service refuses (a user's token
// is not a gateway key) answers each caller its error, final, and a
// Gateway in stream mode needs a Connect or gRPC client.
func TestGatewayStreamRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	gw, err := newClientOver(t, svc, userToken(t, "mallory"), nil, client.GRPC).Gateway(client.GatewayOptions{Stream: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, err := gw.Grab(ctx, c.ID, fmt.Sprintf("u%d", i))
			if !assertErrorIs(t, err, client.ErrForbidden) {
				return
			}
		})
	}
	wg.Wait()
	require.NoError(t, gw.Close())
	_, err = gw.Grab(ctx, c.ID, "late")
	require.ErrorIs(t, err, client.ErrGatewayClosed)
	st, err := svc.Engine.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Zero(t, st.GrantedCount)

	_, err = newClient(t, svc, gatewayKey, nil).Gateway(client.GatewayOptions{Stream: true})
	require.Error(t, err, "stream mode over JSON")
}

func assertErrorIs(t *testing.T, err, target error) bool {
	if !errors.Is(err, target) {
		t.Errorf("got %v, want %v", err, target)
		return false
	}
	return true
}

// TestGatewayStreamServeStops: the instance that holds the stream stops
// (a deploy) while 64 goroutines grab: it answers what it read and ends
// the stream not_ready; the gateway opens a new one, which reaches the
// next instance on the same Redis, and sends the grabs left unanswered.
func TestGatewayStreamServeStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cfg *httpapi.Config
	svc := newServiceWith(t, func(c *httpapi.Config) { cfg = c })
	old, ok := svc.fault.next.(*httpapi.Server)
	require.True(t, ok)
	next, err := httpapi.New(*cfg)
	require.NoError(t, err)
	const total, packets = 100_000, 1000
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: total, Count: packets})
	require.NoError(t, err)
	gw, obs := newStreamGateway(t, svc, client.Connect, client.GatewayOptions{MaxBatch: 64})

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if _, results := obs.breaks(); results >= 500 {
				break
			}
			time.Sleep(tick) // polled, as require.Eventually does
		}
		svc.fault.mu.Lock()
		svc.fault.next = next
		svc.fault.mu.Unlock()
		old.Stopping()
	}()
	k := newTold()
	grabMany(t, gw, c.ID, 64, 40, k)
	<-stopped
	require.False(t, t.Failed())
	// The grabs may all have been answered before the stop came (a fast
	// run, and an idle stream's end is no break of any caller's grab):
	// the same users asked again are answered on the other instance.
	grabMany(t, gw, c.ID, 64, 5, k)
	require.False(t, t.Failed())
	obs.mu.Lock()
	notReady, broken := 0, []string{}
	for _, err := range obs.errs {
		if err != nil {
			broken = append(broken, err.Error())
		}
		if errors.Is(err, client.ErrNotReady) {
			notReady++
		}
	}
	obs.mu.Unlock()
	// The stop ends the stream not_ready (a break, when grabs were in
	// flight on it): the gateway's callers were answered on the other
	// instance (grabMany fails on any error; the second stream below) and
	// none was told two packets (k.check).
	t.Logf("breaks: %d, not_ready %d: %v", len(broken), notReady, broken)
	require.Equal(t, 2, svc.fault.count("/GrabStream"), "one stream on each instance")
	require.Len(t, k.packets, packets)
	for u := range k.packets {
		if k.granted[u] == 0 {
			k.granted[u] = 1 // granted by a grab whose result the stop lost
		}
	}
	k.check(t, svc, c.ID, total)
}
