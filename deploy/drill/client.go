package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hongbao/hongbao/client/token"
	"github.com/hongbao/hongbao/internal/history"
)

// api is one API process as a gateway sees it.
type api struct {
	url   string
	ready atomic.Bool
}

// gateway sends each call to an API process its readiness probe calls
// ready, as a load balancer in front of the deployment does: a process
// that says not ready (at a SIGTERM, for its shutdown delay) gets no new
// calls, so a rolling restart refuses none.
type gateway struct {
	apis   []*api
	client *http.Client
	probe  *http.Client
}

func newGateway(urls []string) *gateway {
	tr := &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}
	g := &gateway{
		// A call a frozen Redis holds ends as unknown.
		client: &http.Client{Timeout: 5 * time.Second, Transport: tr},
		probe:  &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	for _, u := range urls {
		g.apis = append(g.apis, &api{url: strings.TrimRight(u, "/")})
	}
	return g
}

// ready asks one API's /readyz.
func (g *gateway) readyz(a *api) (int, string) {
	resp, err := g.probe.Get(a.url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// watch probes every API every interval until ctx ends.
func (g *gateway) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, a := range g.apis {
			code, _ := g.readyz(a)
			a.ready.Store(code == http.StatusOK)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pick is a ready API at random, or any when none is ready.
func (g *gateway) pick() *api {
	var ready []*api
	for _, a := range g.apis {
		if a.ready.Load() {
			ready = append(ready, a)
		}
	}
	if len(ready) == 0 {
		return g.apis[rand.IntN(len(g.apis))]
	}
	return ready[rand.IntN(len(ready))]
}

// allReady reports whether every API says ready.
func (g *gateway) allReady() bool {
	for _, a := range g.apis {
		if !a.ready.Load() {
			return false
		}
	}
	return true
}

// call sends one request with a bearer credential and decodes a JSON
// answer.
func (g *gateway) call(c *http.Client, method, url, cred, body string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		_ = json.Unmarshal(b, &m)
	}
	return resp.StatusCode, m, nil
}

// refused reports whether err is a connection refused before any byte
// was sent.
func refused(err error) bool {
	var oe *net.OpError
	return err != nil && (errors.As(err, &oe) && oe.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED))
}

// classify fills an Op's result from an HTTP answer: an answer that says
// what the call did is OK, a refusal before any effect (a refused
// connection, 4xx) is Fail, the rest (503, 500, a timeout, a cut
// connection) Unknown.
func classify(op *history.Op, code int, m map[string]any, err error) {
	errCode := ""
	if e, ok := m["error"].(map[string]any); ok {
		errCode, _ = e["code"].(string)
	}
	switch {
	case refused(err):
		op.Result, op.Note = history.Fail, "dial: "+err.Error()
	case err != nil:
		op.Result, op.Note = history.Unknown, err.Error()
	case code == http.StatusOK:
		op.Result = history.OK
		op.Outcome, _ = m["outcome"].(string)
		if op.Kind == history.Held {
			op.Outcome = "held"
		}
		op.Packet, _ = m["packet_id"].(string)
		if c, ok := m["amount_cents"].(float64); ok {
			op.Cents = int64(c)
		}
	case code == http.StatusNotFound && (errCode == history.NoGrant || errCode == history.NoReservation),
		code == http.StatusConflict && (errCode == "cancelled" || errCode == "expired" || errCode == "confirmed"):
		op.Result, op.Outcome = history.OK, errCode
	case code == http.StatusTooManyRequests:
		op.Result, op.Note = history.Fail, "429"
	case code >= 500:
		op.Result, op.Note = history.Unknown, fmt.Sprintf("%d %s", code, errCode)
	default:
		op.Result, op.Note = history.Fail, fmt.Sprintf("%d %v", code, m)
	}
}

// clients are the shoppers and the payment system: every call goes through
// the gateway and is recorded.
type clients struct {
	g      *gateway
	rec    *history.Recorder
	secret token.Secret
	pay    string
	id     string // the red packet campaign
	did    string // the discount campaign

	tokMu  sync.Mutex
	tokens map[string]string

	phase    atomic.Pointer[string] // the fault under way, for the refused counts
	mu       sync.Mutex
	refused  map[string]int // refused connections by phase
	badFails []string       // refusals that should not happen (4xx other than 429)
	pending  []order        // orders a client gave up on before an answer
	given    []order        // orders given a discount

	answered atomic.Int64
}

// order is one discount order a client drives to its end.
type order struct {
	user, order string
	cents       int64
	confirm     bool
	abandon     bool // reserve only: the hold expires and the reaper returns it
}

func (c *clients) setPhase(p string) { c.phase.Store(&p) }

func (c *clients) userToken(user string) string {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	if t, ok := c.tokens[user]; ok {
		return t
	}
	t, err := token.Mint(c.secret, user, 12*time.Hour, time.Now())
	if err != nil {
		panic(err) // the secret was checked at start
	}
	c.tokens[user] = t
	return t
}

// do sends one recorded call and returns it.
func (c *clients) do(client int, op history.Op, method, path, body string) history.Op {
	cred := c.userToken(op.User)
	if op.Kind == history.Reserve || op.Kind == history.Confirm || op.Kind == history.Cancel {
		// The payment system calls these, naming the user in the body.
		cred = c.pay
		user := fmt.Sprintf(`"user_id":%q`, op.User)
		if body == "" {
			body = "{" + user + "}"
		} else {
			body = "{" + user + "," + strings.TrimPrefix(body, "{")
		}
	}
	a := c.g.pick()
	op.Client = client
	op.Start = c.rec.Now()
	code, m, err := c.g.call(c.g.client, method, a.url+path, cred, body)
	op.End = c.rec.Now()
	classify(&op, code, m, err)
	if op.Result == history.Fail {
		c.mu.Lock()
		switch {
		case strings.HasPrefix(op.Note, "dial"):
			c.refused[*c.phase.Load()]++
		case op.Note != "429":
			c.badFails = append(c.badFails, fmt.Sprintf("%s for %s answered %s", op.Kind, op.User, op.Note))
		}
		c.mu.Unlock()
	}
	c.rec.Add(op)
	if op.Result == history.OK {
		c.answered.Add(1)
	}
	return op
}

func backoff(attempt int) { time.Sleep(time.Duration(min(5*(attempt+1), 200)) * time.Millisecond) }

// until repeats a call until it has an answer or patience runs out.
func (c *clients) until(client int, op history.Op, method, path, body string, patience time.Duration) history.Op {
	deadline := time.Now().Add(patience)
	for attempt := 0; ; attempt++ {
		got := c.do(client, op, method, path, body)
		if got.Result == history.OK || time.Now().After(deadline) {
			return got
		}
		backoff(attempt)
	}
}

// grab grabs until answered; after every other unknown answer it looks
// whether the grab landed (GET grants/me) before it grabs again, as a
// client may.
func (c *clients) grab(client int, user string, patience time.Duration) history.Op {
	deadline := time.Now().Add(patience)
	for attempt := 0; ; attempt++ {
		got := c.do(client, history.Op{Kind: history.Grab, Campaign: c.id, User: user}, "POST", "/v1/campaigns/"+c.id+"/grab", "")
		if got.Result == history.OK || time.Now().After(deadline) {
			return got
		}
		if got.Result == history.Unknown && attempt%2 == 0 {
			c.do(client, history.Op{Kind: history.Held, Campaign: c.id, User: user}, "GET", "/v1/campaigns/"+c.id+"/grants/me", "")
		}
		backoff(attempt)
	}
}

func (c *clients) held(client int, user string, patience time.Duration) history.Op {
	return c.until(client, history.Op{Kind: history.Held, Campaign: c.id, User: user}, "GET", "/v1/campaigns/"+c.id+"/grants/me", "", patience)
}

func (c *clients) reserve(client int, o order, patience time.Duration) history.Op {
	return c.until(client, history.Op{Kind: history.Reserve, Campaign: c.did, User: o.user, Order: o.order, OrderCents: o.cents},
		"POST", "/v1/discounts/"+c.did+"/reserve", fmt.Sprintf(`{"order_id":%q,"order_amount_cents":%d}`, o.order, o.cents), patience)
}

// finish confirms or cancels o until answered.
func (c *clients) finish(client int, o order, confirm bool, patience time.Duration) history.Op {
	kind, verb := history.Cancel, "cancel"
	if confirm {
		kind, verb = history.Confirm, "confirm"
	}
	return c.until(client, history.Op{Kind: kind, Campaign: c.did, User: o.user, Order: o.order},
		"POST", "/v1/discounts/"+c.did+"/orders/"+o.order+"/"+verb, "", patience)
}

// drive reserves a discount for o, then confirms or cancels it (or, for an
// abandoned order, leaves the hold to expire), each step repeated until
// answered; it reports whether o reached its end, and whether it was given
// a discount.
func (c *clients) drive(client int, o order, patience time.Duration) (done, given bool) {
	r := c.reserve(client, o, patience)
	if r.Result != history.OK {
		return false, false
	}
	if r.Outcome != "reserved" && r.Outcome != "already" {
		return true, false // refused, or released already
	}
	if o.abandon {
		return true, false
	}
	return c.finish(client, o, o.confirm, patience).Result == history.OK, true
}

// place drives an order and keeps it for resolve when it did not end or
// was given a discount.
func (c *clients) place(w int, o order) {
	done, given := c.drive(w, o, 10*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !done {
		c.pending = append(c.pending, o)
	}
	if given {
		c.given = append(c.given, o)
	}
}

// packetUser is one user's grabs (every fourth with a double click) and
// reads.
func (c *clients) packetUser(w, u int) {
	user := fmt.Sprintf("d%d", u)
	if u%4 == 0 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); c.grab(w, user, 10*time.Second) }()
		c.grab(w, user, 10*time.Second)
		wg.Wait()
	} else {
		c.grab(w, user, 10*time.Second)
	}
	if u%3 == 0 {
		c.held(w, user, 10*time.Second)
	}
}

// discountUser is one user's orders: one or two, some cancelled, some
// abandoned on hold.
func (c *clients) discountUser(w, u int) {
	user := fmt.Sprintf("d%d", u)
	c.place(w, order{user: user, order: "a", cents: int64(100 + u%700), confirm: u%5 != 0, abandon: u%13 == 0})
	if u%2 == 0 {
		c.place(w, order{user: user, order: "b", cents: int64(300 + u%400), confirm: u%3 != 0})
	}
}

// workload runs the shoppers, half on red packets and half on discounts,
// until every user had their turn and stop is closed: a client whose users
// ran out keeps grabbing and reading back, or placing orders over the
// per-user limit, so that every fault meets traffic.
func (c *clients) workload(users, workers int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	var extra atomic.Int64
	packets, discounts := make(chan int), make(chan int)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				for u := range packets {
					c.packetUser(w, u)
				}
			} else {
				for u := range discounts {
					c.discountUser(w, u)
				}
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				user := fmt.Sprintf("d%d", rand.IntN(users))
				if w%2 == 0 {
					c.grab(w, user, 10*time.Second)
					c.held(w, user, 10*time.Second)
				} else {
					c.place(w, order{user: user, order: fmt.Sprintf("x%d", extra.Add(1)), cents: 500, confirm: true})
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	go func() {
		for u := range users {
			discounts <- u
		}
		close(discounts)
	}()
	for u := range users {
		packets <- u
	}
	close(packets)
	wg.Wait()
}

// resolve ends what the faults left open: every user reads their packet
// back, every order a client gave up on is driven to its end again (each
// step is idempotent), and every order given a discount is read back by
// reserving it again, and released if it is held anew.
func (c *clients) resolve(users, workers int) {
	parallel(workers, users, func(w, u int) { c.held(w, fmt.Sprintf("d%d", u), 60*time.Second) })
	parallel(workers, len(c.pending), func(w, i int) {
		o := c.pending[i]
		o.abandon = false // a retried abandoned order is cancelled, so that nothing stays open
		if _, given := c.drive(w, order{user: o.user, order: o.order, cents: o.cents, confirm: o.confirm && !c.pending[i].abandon}, 60*time.Second); given {
			c.mu.Lock()
			c.given = append(c.given, o)
			c.mu.Unlock()
		}
	})
	seen := map[order]bool{}
	var given []order
	for _, o := range c.given {
		if !seen[o] {
			seen[o] = true
			given = append(given, o)
		}
	}
	parallel(workers, len(given), func(w, i int) {
		o := given[i]
		switch r := c.reserve(w, o, 60*time.Second); r.Outcome {
		case "reserved": // gone, and reserved anew: release it
			c.finish(w, o, false, 60*time.Second)
		case "already":
			c.finish(w, o, o.confirm, 60*time.Second)
		}
	})
}

// parallel calls fn(worker, i) for i in [0, n) on workers goroutines.
func parallel(workers, n int, fn func(w, i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}
