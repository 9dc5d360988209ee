package clienttest

import (
	"context"
	"errors"
	"fmt"
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

// How long a test waits for a Gateway's queue to reach a length.
const (
	waitFor = 10 * time.Second
	tick    = time.Millisecond
)

// batches records what a Gateway's Observe saw.
type batches struct {
	mu    sync.Mutex
	sizes []int
	errs  []error
}

func (b *batches) observe(x client.GatewayBatch) {
	b.mu.Lock()
	b.sizes = append(b.sizes, x.Users)
	b.errs = append(b.errs, x.Err)
	b.mu.Unlock()
}

func (b *batches) total() (requests, users, biggest int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.sizes {
		users += n
		biggest = max(biggest, n)
	}
	return len(b.sizes), users, biggest
}

// newGateway is a Gateway of svc over rt (when not nil), with its
// batches observed.
func newGateway(t *testing.T, svc *service, rt http.RoundTripper, o client.GatewayOptions) (*client.Gateway, *batches) {
	t.Helper()
	b := &batches{}
	o.Observe = b.observe
	gw, err := newClient(t, svc, gatewayKey, rt).Gateway(o)
	require.NoError(t, err)
	return gw, b
}

// told is what the Gateway answered each user who holds a packet.
type told struct {
	mu      sync.Mutex
	packets map[string]string // user -> packet id
	cents   map[string]int64
	granted map[string]int // user -> Granted answers
}

func newTold() *told {
	return &told{packets: map[string]string{}, cents: map[string]int64{}, granted: map[string]int{}}
}

// record keeps a Grab's answer, and fails when a user is told two
// packets.
func (k *told) record(t *testing.T, user string, g *client.Grab) {
	if !g.Holds() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.packets[user]; ok && p != g.PacketID {
		t.Errorf("user %s told packet %s, then %s", user, p, g.PacketID)
	}
	k.packets[user], k.cents[user] = g.PacketID, g.AmountCents
	if g.Outcome == client.Granted {
		k.granted[user]++
	}
}

// check holds the answers to the engine: each user told a packet holds
// exactly it, granted once; no packet is told to two users; the
// campaign's counters are the told packets' and conserve the total.
func (k *told) check(t *testing.T, svc *service, id string, total int64) {
	t.Helper()
	ctx := context.Background()
	owner := map[string]string{}
	var sum int64
	for user, p := range k.packets {
		require.Equal(t, 1, k.granted[user], "user %s answered granted once (a repeat answers already_granted)", user)
		g, err := svc.Engine.Held(ctx, id, user)
		require.NoError(t, err, "user %s was told %s", user, p)
		require.Equal(t, p, fmt.Sprintf("%s/%d", id, g.Seq), "user %s holds the packet told", user)
		require.Equal(t, k.cents[user], g.Cents)
		require.NotContains(t, owner, p, "packet %s told to %s and %s", p, owner[p], user)
		owner[p] = user
		sum += g.Cents
	}
	st, err := svc.Engine.Status(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, len(k.packets), st.GrantedCount, "the campaign granted what was told, no more")
	require.Equal(t, sum, st.GrantedCents)
	require.Equal(t, total, st.GrantedCents+st.RemainingCents, "conservation")
}

// TestGatewayManyUsers: 64 goroutines grab for 40 users each through one
// Gateway, each user by two goroutines; the calls are coalesced into few
// batch requests, each user is answered once granted and once
// already_granted with the same packet, or sold out twice, and the
// engine holds exactly what was told.
func TestGatewayManyUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	const total, packets = 100_000, 1000
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: total, Count: packets})
	require.NoError(t, err)
	gw, obs := newGateway(t, svc, nil, client.GatewayOptions{})

	const goroutines, perG = 64, 40
	k := newTold()
	soldOut := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				user := fmt.Sprintf("gw-%d-%d", g%(goroutines/2), i) // goroutines g and g+32 share users
				r, err := gw.Grab(ctx, c.ID, user)
				if !assertNoError(t, err) {
					return
				}
				k.record(t, user, r)
				if r.Outcome == client.SoldOut {
					mu.Lock()
					soldOut[user]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())

	users := goroutines / 2 * perG
	require.Len(t, k.packets, packets, "%d users for %d packets: every packet granted", users, packets)
	require.Len(t, soldOut, users-packets)
	for u, n := range soldOut {
		require.Equal(t, 2, n, "user %s holds nothing: sold out both times", u)
	}
	k.check(t, svc, c.ID, total)

	requests, named, biggest := obs.total()
	require.Equal(t, goroutines*perG, named, "every call in exactly one batch")
	require.Equal(t, requests, svc.fault.count("/grabs"), "one request a batch, none retried")
	require.Greater(t, biggest, 1, "concurrent calls were coalesced")
	require.Less(t, requests, goroutines*perG/4, "far fewer requests than calls")
	require.Zero(t, gw.Queued(c.ID))
	t.Logf("%d calls in %d batch requests, the biggest of %d users", named, requests, biggest)
}

// assertNoError is require.NoError for a goroutine other than the
// test's.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestGatewayLostReply: the first batch's reply is lost after the
// service granted; the Gateway sends the batch again, and its users are
// answered already_granted with the packets the first attempt granted.
func TestGatewayLostReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 10_000, Count: 100})
	require.NoError(t, err)
	drop := &dropFirst{suffix: "/grabs"}
	gw, obs := newGateway(t, svc, drop, client.GatewayOptions{})

	k := newTold()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				user := fmt.Sprintf("lost-%d-%d", g, i)
				r, err := gw.Grab(ctx, c.ID, user)
				if assertNoError(t, err) {
					k.record(t, user, r)
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	require.True(t, drop.dropped)
	require.Len(t, k.packets, 64, "every user holds a packet")
	already := 0
	for u := range k.packets {
		if k.granted[u] == 0 {
			already++
			k.granted[u] = 1 // granted by the lost attempt: check holds it to the engine
		}
	}
	require.Positive(t, already, "the lost batch's users were answered already_granted")
	k.check(t, svc, c.ID, 10_000)
	requests, named, _ := obs.total()
	require.Equal(t, 64, named)
	require.Equal(t, requests+1, svc.fault.count("/grabs"), "one batch sent twice")
}

// gate holds the requests of a route until released, and says when one
// arrived.
type gate struct {
	arrived chan int
	release chan struct{}
}

func holdRequests(svc *service, suffix string) *gate {
	g := &gate{arrived: make(chan int, 16), release: make(chan struct{})}
	svc.fault.set(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if strings.HasSuffix(r.URL.Path, suffix) {
			select {
			case g.arrived <- n:
			default: // nobody counts these any more
			}
			<-g.release
		}
		return false
	})
	return g
}

// TestGatewayCancel: a caller that gives up while queued leaves the
// queue (nothing is sent for it); one that gives up while its batch is in
// flight hears the outcome is unknown, and the batch goes on for the
// others, granting it all the same.
func TestGatewayCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	gw, obs := newGateway(t, svc, nil, client.GatewayOptions{})
	g := holdRequests(svc, "/grabs")

	type answer struct {
		grab *client.Grab
		err  error
	}
	grab := func(ctx context.Context, user string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			r, err := gw.Grab(ctx, c.ID, user)
			ch <- answer{r, err}
		}()
		return ch
	}

	// The first batch (one user) is held; ann and bob queue behind it.
	first := grab(ctx, "first")
	require.Equal(t, 1, <-g.arrived)
	annCtx, cancelAnn := context.WithCancel(ctx)
	ann := grab(annCtx, "ann")
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 1 }, waitFor, tick)
	bob := grab(ctx, "bob")
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 2 }, waitFor, tick)
	cancelAnn()
	a := <-ann
	require.ErrorIs(t, a.err, context.Canceled)
	require.NotErrorIs(t, a.err, client.ErrOutcomeUnknown, "ann was never sent")
	require.Equal(t, 1, gw.Queued(c.ID))

	// Released: the next batch is bob's alone, and is held in turn.
	g.release <- struct{}{}
	f := <-first
	require.NoError(t, f.err)
	require.Equal(t, client.Granted, f.grab.Outcome)
	require.Equal(t, 2, <-g.arrived)
	// Cal joins the batch after, and gives up while it is in flight.
	calCtx, cancelCal := context.WithCancel(ctx)
	cal := grab(calCtx, "cal")
	dee := grab(ctx, "dee")
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 2 }, waitFor, tick)
	g.release <- struct{}{}
	b := <-bob
	require.NoError(t, b.err)
	require.Equal(t, client.Granted, b.grab.Outcome)
	require.Equal(t, 3, <-g.arrived)
	cancelCal()
	x := <-cal
	require.ErrorIs(t, x.err, client.ErrOutcomeUnknown, "cal's batch was sent: its outcome is unknown to cal")
	require.ErrorIs(t, x.err, context.Canceled)
	g.release <- struct{}{}
	d := <-dee
	require.NoError(t, d.err, "cal's cancellation did not cancel dee's batch")
	require.Equal(t, client.Granted, d.grab.Outcome)

	_, err = svc.Engine.Held(ctx, c.ID, "ann")
	require.ErrorIs(t, err, hongbao.ErrNoGrant, "ann was never grabbed")
	held, err := svc.Engine.Held(ctx, c.ID, "cal")
	require.NoError(t, err, "cal's batch went on")
	close(g.release)
	again, err := gw.Grab(ctx, c.ID, "cal")
	require.NoError(t, err)
	require.Equal(t, client.AlreadyGranted, again.Outcome)
	require.Equal(t, fmt.Sprintf("%s/%d", c.ID, held.Seq), again.PacketID)

	requests, named, _ := obs.total()
	require.Equal(t, 4, requests, "first, bob, cal and dee, cal again")
	require.Equal(t, 1+1+2+1, named)
}

// TestGatewayBadUser: a user id the service would refuse is refused
// before it is queued, so it fails only its own caller: the service
// refuses a whole batch for one bad id, and would have failed the users
// it was queued with.
func TestGatewayBadUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	gw, obs := newGateway(t, svc, nil, client.GatewayOptions{})
	g := holdRequests(svc, "/grabs")

	first := make(chan error, 1)
	go func() { _, err := gw.Grab(ctx, c.ID, "ok-0"); first <- err }()
	require.Equal(t, 1, <-g.arrived)
	good := make(chan *client.Grab, 2)
	for _, u := range []string{"ok-1", "ok-2"} {
		go func() {
			r, err := gw.Grab(ctx, c.ID, u)
			assertNoError(t, err)
			good <- r
		}()
	}
	require.Eventually(t, func() bool { return gw.Queued(c.ID) == 2 }, waitFor, tick)
	for _, bad := range []string{"", "a b", "x/y", string(make([]byte, 65))} {
		// Bounded: a bad id that were queued would wait behind the held
		// request, and end with the deadline, not ErrInvalidID.
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := gw.Grab(short, c.ID, bad)
		cancel()
		require.ErrorIs(t, err, client.ErrInvalidID, "%q", bad)
	}
	require.Equal(t, 2, gw.Queued(c.ID), "no bad id queued")
	close(g.release)
	require.NoError(t, <-first)
	for range 2 {
		r := <-good
		require.NotNil(t, r)
		require.Equal(t, client.Granted, r.Outcome)
	}
	requests, named, _ := obs.total()
	require.Equal(t, 2, requests)
	require.Equal(t, 3, named)

	// A batch's own error (no such campaign) is each of its callers'.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := gw.Grab(ctx, c.ID+"-none", fmt.Sprintf("u%d", i))
			if !errors.Is(err, client.ErrNotFound) {
				t.Errorf("a grab of no campaign: %v", err)
			}
		}()
	}
	wg.Wait()
}

// TestGatewayUserLimited: a user past the service's per-user limit is
// answered rate_limited, alone; the batch's other users are grabbed.
func TestGatewayUserLimited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newServiceWith(t, func(c *httpapi.Config) { c.UserRate, c.UserBurst = 0.001, 1 })
	c, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	gw, _ := newGateway(t, svc, nil, client.GatewayOptions{})
	r, err := gw.Grab(ctx, c.ID, "lim")
	require.NoError(t, err)
	require.Equal(t, client.Granted, r.Outcome)
	_, err = gw.Grab(ctx, c.ID, "lim")
	require.ErrorIs(t, err, client.ErrRateLimited, "the user's second grab within the limit's period")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	r, err = gw.Grab(ctx, c.ID, "other")
	require.NoError(t, err)
	require.Equal(t, client.Granted, r.Outcome)
}

// TestGatewayOptions: bounds out of range are refused; a full queue
// answers ErrGatewayFull without sending.
func TestGatewayOptions(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	c := newClient(t, svc, gatewayKey, nil)
	for _, o := range []client.GatewayOptions{{MaxBatch: client.MaxGatewayBatch + 1}, {MaxBatch: -1}, {InFlight: -1}, {MaxQueue: -1}} {
		_, err := c.Gateway(o)
		require.Error(t, err, "%+v", o)
	}
	ctx := context.Background()
	cp, err := newClient(t, svc, adminKey, nil).CreateCampaign(ctx, client.CampaignSpec{TotalCents: 1000, Count: 10})
	require.NoError(t, err)
	gw, _ := newGateway(t, svc, nil, client.GatewayOptions{MaxQueue: 1})
	g := holdRequests(svc, "/grabs")
	done := make(chan error, 2)
	go func() { _, err := gw.Grab(ctx, cp.ID, "q0"); done <- err }()
	require.Equal(t, 1, <-g.arrived)
	go func() { _, err := gw.Grab(ctx, cp.ID, "q1"); done <- err }()
	require.Eventually(t, func() bool { return gw.Queued(cp.ID) == 1 }, waitFor, tick)
	_, err = gw.Grab(ctx, cp.ID, "q2")
	require.ErrorIs(t, err, client.ErrGatewayFull)
	close(g.release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	_, err = svc.Engine.Held(ctx, cp.ID, "q2")
	require.ErrorIs(t, err, hongbao.ErrNoGrant)
}
