package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/history"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/ledgertest"
	"github.com/hongbao/hongbao/ledger/open"
)

// histConfig sizes TestHistoryUnderFaults.
type histConfig struct {
	users, packets, shards, workers int
	budget, quota                   int64 // the discount campaign, cents and units
	faults                          []string
}

// historyConfig is the short or the long version; HONGBAO_HISTORY_FAULTS
// (a comma-separated list of serve, master, lag, freeze, postgres)
// replaces its faults.
func historyConfig() histConfig {
	cfg := historySizes()
	if v := os.Getenv("HONGBAO_HISTORY_FAULTS"); v != "" {
		cfg.faults = strings.Split(v, ",")
	}
	return cfg
}

func historySizes() histConfig {
	if longFaults() {
		var faults []string
		for range 4 {
			faults = append(faults, "serve", "lag", "postgres", "freeze", "master")
		}
		return histConfig{users: 6000, packets: 4000, shards: 2, workers: 32, budget: 1_200_000, quota: 5000, faults: faults}
	}
	return histConfig{users: 300, packets: 200, shards: 2, workers: 12, budget: 60_000, quota: 250,
		faults: []string{"serve", "lag", "postgres"}}
}

// TestHistoryUnderFaults: clients grab red packets (one at a time, and a
// gateway's clients several users a request through the batch route, or
// on a gRPC or Connect stream kept open on each serve for the whole run),
// read their packet back, and reserve, confirm and cancel discounts, over
// HTTP on two serve processes (the binary) on a Redis master, its
// replica and three sentinels (--wait-replicas 1) and a PostgreSQL
// ledger, and record every call and its answer: ok, refused, or unknown
// (503, a timeout, a cut connection, a broken stream). Meanwhile a
// nemesis SIGKILLs a serve (while streams are open on it) and starts it
// again, partitions the replica from the master (SIGSTOP, its link cut)
// and then SIGKILLs the master, so that the sentinels promote a replica without the
// master's last writes, and restarts PostgreSQL as a crash would; the long
// version also freezes the master (SIGSTOP) until the sentinels fail over
// and lets it come back believing it is the master, and SIGKILLs the
// master outright. Afterwards every user reads their packet back, every
// unknown call is repeated until it has an answer, every order given a
// discount is read back (a repeated reserve), the campaigns are closed and
// settled, and package history checks the history against Redis and the
// ledger: per-user and per-order registers linearizable (porcupine), every
// packet told of held and paid to that user and to nobody else, sums to
// the cent, discounts within budget, quota and limits and each confirmed
// one paid once. HONGBAO_LONG_FAULTS=1 (make faults) runs the long
// version; HONGBAO_HISTORY_FAULTS replaces the faults, and
// HONGBAO_HISTORY_DUMP=<file> writes the history as JSON lines.
func TestHistoryUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	cfg := historyConfig()
	s := testenv.NewSentinel(t, testenv.SentinelOptions{})
	n := &nemesis{t: t, s: s}
	n.faults = map[string]func(context.Context) error{"master": n.killMaster, "freeze": n.freeze, "lag": n.lag}
	runHistory(t, cfg, s.URL, s.Client, n)
}

// TestHistoryOnCluster is TestHistoryUnderFaults on a Redis Cluster of
// three masters, each with a replica, the campaigns over four shards
// spread over them, so that packets move between shards near the end of
// the rain. The nemesis moves a shard's slot to another master
// (MIGRATE, keys and all, while clients run) and SIGKILLs the master of a
// shard, whose replica takes over (the old master comes back as its
// replica), besides SIGKILLing a serve and restarting PostgreSQL. Only in
// the long version (make faults).
func TestHistoryOnCluster(t *testing.T) {
	if !longFaults() && os.Getenv("HONGBAO_HISTORY_CLUSTER") != "1" {
		t.Skip("HONGBAO_LONG_FAULTS=1 (make faults), or HONGBAO_HISTORY_CLUSTER=1 for the short size")
	}
	t.Parallel()
	cfg := historyConfig()
	cfg.shards = 4
	if os.Getenv("HONGBAO_HISTORY_FAULTS") == "" {
		cfg.faults = []string{"migrate", "failover"}
		for range 3 * btoi(longFaults()) {
			cfg.faults = append(cfg.faults, "migrate", "serve", "failover", "postgres")
		}
	}
	c := testenv.NewCluster(t, testenv.ClusterOptions{ReplicasPerMaster: 1})
	client := c.NewClient(t, rueidis.ClientOption{})
	n := &nemesis{t: t, c: c}
	n.faults = map[string]func(context.Context) error{"migrate": n.migrate, "failover": n.failover}
	runHistory(t, cfg, "redis://"+c.Nodes[0].Addr, client, n)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runHistory runs the clients, the nemesis and the checker of the history
// tests on Redis at redisURL (read directly with client), two serve
// binaries and a private PostgreSQL.
func runHistory(t *testing.T, cfg histConfig, redisURL string, client rueidis.Client, n *nemesis) {
	pg := ledgertest.StartPostgres(t)
	dir := t.TempDir()
	fx := &serveFixture{dir: dir, adminFile: writeSecret(t, dir, "admin.key"), secretFile: writeSecret(t, dir, "token.secret"), dsn: pg.DSN}
	payFile := writeSecret(t, dir, "payment.key")
	payKey, err := os.ReadFile(payFile)
	require.NoError(t, err)
	gwFile := writeSecret(t, dir, "gateway.key")
	gwKey, err := os.ReadFile(gwFile)
	require.NoError(t, err)
	bin := buildBinary(t)
	var serves []*serveBin
	for i := range 2 {
		serves = append(serves, startServeBin(t, bin, "--redis", redisURL, "--ledger", pg.DSN, "--admin-key-file", fx.adminFile,
			"--payment-key-file", payFile, "--gateway-key-file", gwFile, "--token-secret-file", fx.secretFile, "--user-rate", "-1", "--wait-replicas", "1", "--wait-timeout", "300ms",
			"--lease-ttl", "2s", "--consumer", "h"+strconv.Itoa(i), "--data-dir", filepath.Join(dir, "d"+strconv.Itoa(i))))
	}
	api := fx.api(t, serves[0].URL)
	api.c.Timeout = 5 * time.Second // a call a frozen master holds ends as unknown
	id := api.create(t, serves[0].URL, fmt.Sprintf(`{"total":"%d.00","count":%d,"shards":%d}`, cfg.packets, cfg.packets, cfg.shards))
	code, m, err := api.call("POST", serves[0].URL+"/v1/discounts", api.admin, fmt.Sprintf(
		`{"budget_cents":%d,"quota":%d,"max":"5.00","per_user_count":2,"per_user_amount":"6.00","shards":%d,"hold":"10m"}`,
		cfg.budget, cfg.quota, cfg.shards))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "%v", m)
	did := m["id"].(string)

	h := &histRun{t: t, api: api, serves: serves, rec: history.NewRecorder(), id: id, did: did, pay: strings.TrimSpace(string(payKey)), gw: strings.TrimSpace(string(gwKey))}
	n.pg, n.serves, n.answered, n.now, n.id, n.shards = pg, serves, h.answered.Load, h.rec.Now, id, cfg.shards
	n.beforeServe = h.streamOpenOn
	if n.c != nil {
		// Shards run dry, and packets move between them, near the end of
		// the rain: the cluster's faults begin then.
		n.before = func() { eventually(30*time.Second, func() bool { return h.granted.Load() >= int64(cfg.packets)*6/10 }) }
	}
	nemesisDone := make(chan struct{})
	go func() { defer close(nemesisDone); n.run(cfg.faults) }()
	h.workload(cfg, nemesisDone)
	<-nemesisDone
	require.Equal(t, len(cfg.faults), n.done, "every fault ran: %v", n.log)

	h.resolve(cfg)
	claims := readClaims(t, client, id, cfg.shards)
	base := serves[0].URL
	closeAfterFaults(t, api, base, id)
	closeDiscountAfterFaults(t, api, base, did)
	var st, dst map[string]any
	settled := eventually(120*time.Second, func() bool {
		_, st, err = api.call("GET", base+"/v1/campaigns/"+id, api.admin, "")
		return err == nil && st["state"] == "settled"
	})
	dsettled := eventually(120*time.Second, func() bool {
		_, dst, err = api.call("GET", base+"/v1/discounts/"+did, api.admin, "")
		return err == nil && dst["state"] == "settled"
	})

	t.Logf("transfers between shards (counted since each serve's last start): %d", transfers(api, serves))
	ops := h.rec.Ops()
	dumpHistory(t, ops)
	final := readFinal(t, pg.DSN, ops, claims, cfg, id, did, dst)
	final.Packets[0].Settled, final.Discounts[0].Settled = settled, dsettled
	rep := history.Check(ops, final, 30*time.Second)
	counts := history.Counts(ops)
	t.Logf("history: %d operations (%d ok, %d refused, %d unknown, %d resolved); faults %d: %s; %d packets granted of %d, %d discounts confirmed of %d; anomalies: %d",
		rep.Ops, counts[history.OK], counts[history.Fail], rep.Unknown, rep.Resolved, n.done, strings.Join(n.log, ", "),
		len(claims), cfg.packets, len(final.Discounts[0].Confirmed), cfg.quota, len(rep.Anomalies))
	if !settled || !dsettled {
		t.Logf("not settled: red packets %v; discounts %v", st, dst)
	}
	t.Logf("%d grabs answered through the batch route, %d on gateway streams; %d streams broke, %d grabs in flight on them ended unknown",
		h.batched.Load(), h.streamed.Load(), h.streamBreaks.Load(), h.streamLost.Load())
	require.True(t, rep.OK(), "%s", rep)
	require.Positive(t, h.batched.Load(), "the batch route was used")
	require.Positive(t, h.streamed.Load(), "the streams were used")
	if n.killed > 0 {
		require.Positive(t, h.streamBreaks.Load(), "a serve was killed while streams were open on it")
	}
	require.True(t, settled, "the red packet campaign settles: %v", st)
	require.True(t, dsettled, "the discount campaign settles: %v", dst)
	require.Positive(t, rep.Unknown, "the faults were seen: some calls ended unknown")
	require.EqualValues(t, min(cfg.packets, cfg.users), len(claims), "every packet was granted")
}

// eventually polls cond until it holds (true) or d passes (false).
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// histRun is the clients' side of TestHistoryUnderFaults.
type histRun struct {
	t       *testing.T
	api     *apiClient
	serves  []*serveBin
	rec     *history.Recorder
	id, did string

	pay      string       // the payment system's key: reserve, confirm, cancel
	gw       string       // a gateway's key: the batch route and streams
	batched  atomic.Int64 // users answered OK through the batch route
	answered atomic.Int64 // calls answered OK so far
	granted  atomic.Int64 // grabs answered granted so far
	mu       sync.Mutex
	pending  []histOrder // orders a client gave up on before an answer
	given    []histOrder // orders given a discount

	lanes    []*streamLane // the gateway's streams
	streamed atomic.Int64  // grabs answered OK on a gateway's stream
	// streamBreaks counts the streams that broke, streamLost the grabs in
	// flight on them (each recorded unknown, and sent again).
	streamBreaks, streamLost atomic.Int64
}

// histOrder is one discount order a client drives to its end.
type histOrder struct {
	user, order string
	cents       int64
	confirm     bool
}

// call sends one call to a serve chosen at random, records it and returns
// it. A call that reached no serve (connection refused) is refused, one
// whose answer was lost or says nothing (503, 500, a timeout) unknown.
func (h *histRun) call(client int, op history.Op, method, path, body string) history.Op {
	url := h.serves[rand.IntN(len(h.serves))].URL
	tok := h.api.userToken(h.t, op.User)
	if op.Kind == history.Reserve || op.Kind == history.Confirm || op.Kind == history.Cancel {
		// The payment system calls these, naming the user in the body.
		tok = h.pay
		user := fmt.Sprintf(`"user_id":%q`, op.User)
		if body == "" {
			body = "{" + user + "}"
		} else {
			body = "{" + user + "," + strings.TrimPrefix(body, "{")
		}
	}
	op.Client = client
	op.Start = h.rec.Now()
	code, m, err := h.api.call(method, url+path, tok, body)
	op.End = h.rec.Now()
	classify(&op, code, m, err)
	if op.Result == history.Fail && op.Note != "" && !strings.HasPrefix(op.Note, "429") && !strings.HasPrefix(op.Note, "dial") {
		h.t.Errorf("%s for %s answered %s", op.Kind, op.User, op.Note)
	}
	h.rec.Add(op)
	if op.Result == history.OK {
		h.answered.Add(1)
	}
	if op.Outcome == "granted" {
		h.granted.Add(1)
	}
	return op
}

// classify fills an Op's result from an HTTP answer.
func classify(op *history.Op, code int, m map[string]any, err error) {
	var oe *net.OpError
	errCode := ""
	if e, ok := m["error"].(map[string]any); ok {
		errCode, _ = e["code"].(string)
	}
	switch {
	case err != nil && errors.As(err, &oe) && oe.Op == "dial":
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

// until repeats a call until it has an answer (OK) or patience runs out,
// and returns the last.
func (h *histRun) until(client int, op history.Op, method, path, body string, patience time.Duration) history.Op {
	deadline := time.Now().Add(patience)
	for attempt := 0; ; attempt++ {
		got := h.call(client, op, method, path, body)
		if got.Result == history.OK || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Duration(min(5*(attempt+1), 100)) * time.Millisecond)
	}
}

// grab grabs until answered; after every other unknown answer it looks
// whether the grab landed (GET grants/me) before it grabs again, as a
// client may.
func (h *histRun) grab(client int, user string, patience time.Duration) history.Op {
	deadline := time.Now().Add(patience)
	for attempt := 0; ; attempt++ {
		got := h.call(client, history.Op{Kind: history.Grab, Campaign: h.id, User: user}, "POST", "/v1/campaigns/"+h.id+"/grab", "")
		if got.Result == history.OK || time.Now().After(deadline) {
			return got
		}
		if got.Result == history.Unknown && attempt%2 == 0 {
			h.call(client, history.Op{Kind: history.Held, Campaign: h.id, User: user}, "GET", "/v1/campaigns/"+h.id+"/grants/me", "")
		}
		time.Sleep(time.Duration(min(5*(attempt+1), 100)) * time.Millisecond)
	}
}

func (h *histRun) held(client int, user string, patience time.Duration) history.Op {
	return h.until(client, history.Op{Kind: history.Held, Campaign: h.id, User: user}, "GET", "/v1/campaigns/"+h.id+"/grants/me", "", patience)
}

// order reserves a discount for o, then confirms or cancels it, each step
// repeated until answered; it reports whether o reached its end, and
// whether it was given a discount.
func (h *histRun) order(client int, o histOrder, patience time.Duration) (done, given bool) {
	r := h.reserve(client, o, patience)
	if r.Result != history.OK {
		return false, false
	}
	if r.Outcome != "reserved" && r.Outcome != "already" {
		return true, false // refused, or released already
	}
	return h.finish(client, o, o.confirm, patience).Result == history.OK, true
}

func (h *histRun) reserve(client int, o histOrder, patience time.Duration) history.Op {
	return h.until(client, history.Op{Kind: history.Reserve, Campaign: h.did, User: o.user, Order: o.order, OrderCents: o.cents},
		"POST", "/v1/discounts/"+h.did+"/reserve", fmt.Sprintf(`{"order_id":%q,"order_amount_cents":%d}`, o.order, o.cents), patience)
}

// finish confirms or cancels o until answered.
func (h *histRun) finish(client int, o histOrder, confirm bool, patience time.Duration) history.Op {
	kind, verb := history.Cancel, "cancel"
	if confirm {
		kind, verb = history.Confirm, "confirm"
	}
	return h.until(client, history.Op{Kind: kind, Campaign: h.did, User: o.user, Order: o.order},
		"POST", "/v1/discounts/"+h.did+"/orders/"+o.order+"/"+verb, "", patience)
}

// workload runs the clients, half of them on red packets, half on
// discounts, so that each goes on while faults stall the other. Each user
// grabs (some with a double click) and some read their packet back; each
// places one or two orders. When its users run out before the nemesis is
// done, a client keeps grabbing again and reading packets back, or placing
// orders (over the per-user limit), until it is.
func (h *histRun) workload(cfg histConfig, nemesisDone <-chan struct{}) {
	var wg sync.WaitGroup
	var extra atomic.Int64
	packets, discounts := make(chan int), make(chan int)
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w%2 == 0 {
				for u := range packets {
					h.packetUser(w, u)
				}
			} else {
				for u := range discounts {
					h.discountUser(w, u)
				}
			}
			for {
				select {
				case <-nemesisDone:
					return
				default:
				}
				user := "h" + strconv.Itoa(rand.IntN(cfg.users))
				if w%2 == 0 {
					h.grab(w, user, 10*time.Second)
					h.held(w, user, 10*time.Second)
				} else {
					h.place(w, histOrder{user: user, order: "x" + strconv.FormatInt(extra.Add(1), 10), cents: 500, confirm: true})
				}
			}
		}()
	}
	// A gateway's clients: two of them grab for every fifth user, through
	// the batch route, several users a request; two more for another fifth
	// on their streams (history_stream_test.go).
	batched := make(chan int)
	for b := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := cfg.workers + b
			for {
				u, ok := <-batched
				if !ok {
					break
				}
				users := []int{u}
			gather:
				for len(users) < 8 {
					select {
					case v, ok := <-batched:
						if !ok {
							break gather
						}
						users = append(users, v)
					default:
						break gather
					}
				}
				h.batchUsers(client, users)
			}
			for {
				select {
				case <-nemesisDone:
					return
				default:
				}
				users := make([]int, 2+rand.IntN(7))
				for i := range users {
					users[i] = rand.IntN(cfg.users)
				}
				h.batchUsers(client, users)
			}
		}()
	}
	streamed := make(chan int)
	h.streams(cfg, streamed, nemesisDone, &wg)
	go func() {
		for u := range cfg.users {
			discounts <- u
		}
		close(discounts)
	}()
	for u := range cfg.users {
		switch u % 5 {
		case 2:
			batched <- u
		case 4:
			streamed <- u
		default:
			packets <- u
		}
	}
	close(packets)
	close(batched)
	close(streamed)
	wg.Wait()
}

// batchUsers grabs for users through the batch route (a user may be
// named twice: the second answers already_granted), and reads some of
// them back.
func (h *histRun) batchUsers(client int, us []int) {
	users := make([]string, 0, len(us)+1)
	for _, u := range us {
		users = append(users, "h"+strconv.Itoa(u))
	}
	if us[0]%3 == 0 {
		users = append(users, users[0])
	}
	h.grabBatch(client, users, 10*time.Second)
	for _, u := range us {
		if u%3 == 0 {
			h.held(client, "h"+strconv.Itoa(u), 10*time.Second)
		}
	}
}

// grabBatch grabs for users in batch requests to a serve chosen at random
// until each has an answer or patience runs out. Each user of a request is
// an operation of its own, spanning the request; a lost or 5xx answer
// leaves all of them unknown, and the next request asks again for those
// (a retried batch answers already_granted with the same packet).
func (h *histRun) grabBatch(client int, users []string, patience time.Duration) {
	deadline := time.Now().Add(patience)
	for attempt := 0; len(users) > 0; attempt++ {
		url := h.serves[rand.IntN(len(h.serves))].URL
		body, err := json.Marshal(map[string][]string{"users": users})
		if err != nil {
			h.t.Errorf("batch body: %v", err)
			return
		}
		start := h.rec.Now()
		code, m, err := h.api.call("POST", url+"/v1/campaigns/"+h.id+"/grabs", h.gw, string(body))
		end := h.rec.Now()
		results, _ := m["results"].([]any)
		if err == nil && code == http.StatusOK && len(results) != len(users) {
			h.t.Errorf("a batch of %d users answered %d results: %v", len(users), len(results), m)
			return
		}
		var again []string
		for i, user := range users {
			op := history.Op{Kind: history.Grab, Campaign: h.id, User: user, Client: client, Start: start, End: end}
			if err == nil && code == http.StatusOK {
				r, _ := results[i].(map[string]any)
				if r["user_id"] != user {
					h.t.Errorf("batch result %d names %v, asked for %s", i, r["user_id"], user)
				}
				classify(&op, code, r, nil)
			} else {
				classify(&op, code, m, err)
			}
			if op.Result == history.Fail && op.Note != "" && !strings.HasPrefix(op.Note, "429") && !strings.HasPrefix(op.Note, "dial") {
				h.t.Errorf("a batch grab for %s answered %s", user, op.Note)
			}
			h.rec.Add(op)
			switch {
			case op.Result == history.OK:
				h.answered.Add(1)
				h.batched.Add(1)
				if op.Outcome == "granted" {
					h.granted.Add(1)
				}
			case !slices.Contains(again, user):
				again = append(again, user)
			}
		}
		if time.Now().After(deadline) {
			return
		}
		users = again
		time.Sleep(time.Duration(min(5*(attempt+1), 100)) * time.Millisecond)
	}
}

// packetUser is one user's grabs and reads.
func (h *histRun) packetUser(w, u int) {
	user := "h" + strconv.Itoa(u)
	if u%4 == 0 {
		var cw sync.WaitGroup
		cw.Add(1)
		go func() { defer cw.Done(); h.grab(w, user, 10*time.Second) }()
		h.grab(w, user, 10*time.Second)
		cw.Wait()
	} else {
		h.grab(w, user, 10*time.Second)
	}
	if u%3 == 0 {
		h.held(w, user, 10*time.Second)
	}
}

// discountUser is one user's orders.
func (h *histRun) discountUser(w, u int) {
	user := "h" + strconv.Itoa(u)
	h.place(w, histOrder{user: user, order: "a", cents: int64(100 + u%700), confirm: u%5 != 0})
	if u%2 == 0 {
		h.place(w, histOrder{user: user, order: "b", cents: int64(300 + u%400), confirm: u%3 != 0})
	}
}

// place drives an order, and keeps it for resolve when it did not end
// or was given a discount.
func (h *histRun) place(w int, o histOrder) {
	done, given := h.order(w, o, 10*time.Second)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !done {
		h.pending = append(h.pending, o)
	}
	if given {
		h.given = append(h.given, o)
	}
}

// resolve ends what the faults left open, once they are over: every user
// reads their packet back, every order a client gave up on is driven to
// its end again (each step is idempotent), and every order that was given
// a discount is read back by reserving it again (held or confirmed
// answers already, cancelled 409), and released if it is held again.
func (h *histRun) resolve(cfg histConfig) {
	parallel(cfg.workers, cfg.users, func(w, u int) { h.held(w, "h"+strconv.Itoa(u), 60*time.Second) })
	parallel(cfg.workers, len(h.pending), func(w, i int) {
		o := h.pending[i]
		if _, given := h.order(w, o, 60*time.Second); given {
			h.mu.Lock()
			h.given = append(h.given, o)
			h.mu.Unlock()
		}
	})
	seen := map[histOrder]bool{}
	var given []histOrder
	for _, o := range h.given {
		if !seen[o] {
			seen[o] = true
			given = append(given, o)
		}
	}
	parallel(cfg.workers, len(given), func(w, i int) {
		o := given[i]
		switch r := h.reserve(w, o, 60*time.Second); r.Outcome {
		case "reserved": // gone, and reserved anew: release it
			h.finish(w, o, false, 60*time.Second)
		case "already":
			h.finish(w, o, o.confirm, 60*time.Second)
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

// nemesis injects the faults of the history tests one after another,
// each once the clients made progress since the last: "serve" and
// "postgres" everywhere, the others from faults.
type nemesis struct {
	t      *testing.T
	s      *testenv.Sentinel // the Sentinel setup, or nil
	c      *testenv.Cluster  // the cluster, or nil
	faults map[string]func(context.Context) error
	pg     *ledgertest.PostgresServer
	serves []*serveBin
	id     string // the red packet campaign
	shards int
	// answered counts the clients' answered calls.
	answered func() int64
	now      func() time.Duration
	before   func() // if not nil, runs before the first fault
	// beforeServe, if not nil, runs before serve i is killed.
	beforeServe func(i int)
	killed      int // serves killed
	done        int
	log         []string
}

func (n *nemesis) run(faults []string) {
	ctx := context.Background()
	if n.before != nil {
		n.before()
	}
	for i, f := range faults {
		n.progress(40)
		start := time.Now()
		var err error
		switch fn := n.faults[f]; {
		case f == "serve":
			if n.beforeServe != nil {
				n.beforeServe(i % len(n.serves))
			}
			n.killed++
			err = n.serves[i%len(n.serves)].restart()
		case f == "postgres":
			err = n.pg.Restart(ctx)
		case fn != nil:
			err = fn(ctx)
		default:
			err = fmt.Errorf("no such fault here")
		}
		if err != nil {
			n.t.Errorf("fault %s: %v", f, err)
			return
		}
		n.done++
		n.log = append(n.log, fmt.Sprintf("%s (%.1fs from %v)", f, time.Since(start).Seconds(), (n.now()-time.Since(start)).Round(time.Millisecond)))
	}
	n.progress(40)
}

// killMaster SIGKILLs the Sentinel master; the sentinels promote the
// replica, and the old master comes back as its replica.
func (n *nemesis) killMaster(ctx context.Context) error {
	old := n.s.KillMaster()
	if _, err := n.s.WaitFailover(ctx); err != nil {
		return err
	}
	if err := n.s.RestartAsReplica(ctx, old); err != nil {
		return err
	}
	return n.s.WaitReplicated(ctx)
}

// shardMaster returns a random shard's slot and the address of its master.
func (n *nemesis) shardMaster(ctx context.Context) (int, string, error) {
	k := redisstore.Default.ShardKeys(n.id, n.shards, rand.IntN(n.shards)).Meta
	slot := testenv.KeySlot(k)
	addr, err := n.c.MasterOfSlot(ctx, slot)
	return slot, addr, err
}

// migrate moves a shard's slot, keys and all, to another master while the
// clients run.
func (n *nemesis) migrate(ctx context.Context) error {
	slot, from, err := n.shardMaster(ctx)
	if err != nil {
		return err
	}
	var masters []string
	for _, a := range n.c.Addrs() {
		if ss, err := n.c.SlotsOf(ctx, a); err == nil && len(ss) > 0 && a != from {
			masters = append(masters, a)
		}
	}
	if len(masters) == 0 {
		return errors.New("no other master")
	}
	return n.c.MigrateSlot(ctx, slot, masters[rand.IntN(len(masters))])
}

// failover SIGKILLs the master of a shard; its replica takes over, and the
// old master comes back as the replica of the new one.
func (n *nemesis) failover(ctx context.Context) error {
	slot, old, err := n.shardMaster(ctx)
	if err != nil {
		return err
	}
	n.c.KillNode(old)
	err = waitUntil(ctx, 30*time.Second, func() bool {
		now, err := n.c.MasterOfSlot(ctx, slot)
		return err == nil && now != old
	})
	if err != nil {
		return fmt.Errorf("no replica took over slot %d from %s: %w", slot, old, err)
	}
	if err := n.c.RestartNode(ctx, old); err != nil {
		return err
	}
	if err := n.c.WaitConsistent(ctx); err != nil {
		return err
	}
	return n.c.WaitReplicated(ctx)
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// progress waits until the clients got k more answers, or 20 s.
func (n *nemesis) progress(k int64) { n.progressWithin(k, 20*time.Second) }

// progressWithin waits until the clients got k more answers, or d.
func (n *nemesis) progressWithin(k int64, d time.Duration) {
	target := n.answered() + k
	deadline := time.Now().Add(d)
	for n.answered() < target && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// freeze stops the master (SIGSTOP) until the sentinels promote its
// replica, then lets it run again: it comes back believing it is the
// master until the sentinels make it a replica of the new one.
func (n *nemesis) freeze(ctx context.Context) error {
	node := n.s.MasterNode()
	pid := node.Server().Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	_, err := n.s.WaitFailover(ctx)
	if cerr := syscall.Kill(pid, syscall.SIGCONT); err == nil {
		err = cerr
	}
	if err == nil {
		err = n.s.WaitSentinels(ctx)
	}
	if err == nil {
		err = n.s.WaitReplicated(ctx)
	}
	return err
}

// lag freezes the replica (SIGSTOP) and cuts its link, while the clients
// go on, so that the master takes writes no replica holds (a partition
// between them), then SIGKILLs the master and lets the replica run again:
// the sentinels promote it without those writes.
// Only what waited for a replica (WAIT) may have been acknowledged.
func (n *nemesis) lag(ctx context.Context) error {
	var replica *testenv.Node
	for _, d := range n.s.Data {
		if d.Addr != n.s.Master() && d.Running() {
			replica = d
		}
	}
	if replica == nil {
		return errors.New("no replica to freeze")
	}
	pid := replica.Server().Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	// Its link cut while it cannot reconnect: what the master writes from
	// now on reaches no replica (what the socket held before does).
	m := n.s.MasterNode().Client
	if err := m.Do(ctx, m.B().Arbitrary("CLIENT", "KILL", "TYPE", "replica").Build()).Error(); err != nil {
		return err
	}
	// The partition lasts a second, longer if the clients got fewer than 40
	// answers meanwhile, 3 s at most (with every answer waiting for the
	// replica, few come): a fault's length, not a wait for a condition.
	held := time.Now()
	n.progressWithin(40, 3*time.Second)
	time.Sleep(time.Second - time.Since(held))
	old := n.s.KillMaster()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return err
	}
	if _, err := n.s.WaitFailover(ctx); err != nil {
		return err
	}
	if err := n.s.RestartAsReplica(ctx, old); err != nil {
		return err
	}
	return n.s.WaitReplicated(ctx)
}

// serveBin is serve running as a process of its own on a fixed address,
// which a test may SIGKILL and start again.
type serveBin struct {
	t    *testing.T
	bin  string
	args []string
	URL  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
	stderr *syncBuffer
}

func startServeBin(t *testing.T, bin string, args ...string) *serveBin {
	t.Helper()
	port, err := redisserver.FreePort()
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := &serveBin{t: t, bin: bin, args: append(args, "--listen", addr), URL: "http://" + addr}
	require.NoError(t, p.start())
	t.Cleanup(p.stop)
	return p
}

// start starts the process and waits until it listens.
func (p *serveBin) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, append([]string{"serve"}, p.args...)...)
	p.stderr = &syncBuffer{}
	cmd.Stderr = p.stderr
	out := &syncBuffer{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.exited = cmd, make(chan error, 1)
	go func() { p.exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "listening on "+p.URL) {
		select {
		case err := <-p.exited:
			return fmt.Errorf("serve exited: %v %s", err, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve did not listen: %s", p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// restart SIGKILLs the process, as a crash would, and starts it again.
func (p *serveBin) restart() error {
	p.mu.Lock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.mu.Unlock()
	return p.start()
}

// stop ends the process with SIGINT at the end of the test; it must exit
// cleanly.
func (p *serveBin) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Errorf("serve's exit: %v %s", err, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		p.t.Errorf("serve did not stop: %s", p.stderr.String())
	}
}

// closeDiscountAfterFaults closes a discount campaign, sending the close
// again while it answers 503, as closeAfterFaults does for red packets.
func closeDiscountAfterFaults(t *testing.T, api *apiClient, url, id string) {
	t.Helper()
	waitFor(t, "the discount close to be answered 200", 30*time.Second, func() bool {
		code, _, err := api.call("POST", url+"/v1/discounts/"+id+"/close", api.admin, "")
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, code)
		return code == http.StatusOK
	})
}

// readClaims reads every claim of the campaign from the current master.
func readClaims(t *testing.T, c rueidis.Client, id string, shards int) map[string]history.Packet {
	t.Helper()
	ctx := context.Background()
	out := map[string]history.Packet{}
	for k := range shards {
		key := redisstore.Default.ShardKeys(id, shards, k).Claims
		m, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
		require.NoError(t, err)
		for user, v := range m {
			seq, cents, ok := strings.Cut(v, ":")
			require.True(t, ok, "claim %q of %s", v, user)
			p := history.Packet{}
			p.Seq, err = strconv.ParseInt(seq, 10, 64)
			require.NoError(t, err)
			p.Cents, err = strconv.ParseInt(cents, 10, 64)
			require.NoError(t, err)
			out[user] = p
		}
	}
	return out
}

// readFinal reads the ledger's side of both campaigns, and the balance of
// every user of the history.
func readFinal(t *testing.T, dsn string, ops []history.Op, claims map[string]history.Packet, cfg histConfig, id, did string, dst map[string]any) history.Final {
	t.Helper()
	ctx := context.Background()
	l, err := open.Open(ctx, dsn)
	require.NoError(t, err)
	defer l.Close()
	c := history.Campaign{ID: id, Total: int64(cfg.packets) * 100, Claims: claims}
	require.NoError(t, l.Grants(ctx, id, func(g ledger.Grant) error {
		c.Grants = append(c.Grants, history.Grant{User: g.User, Seq: g.Seq, Cents: g.Cents})
		return nil
	}))
	tot, err := l.Totals(ctx, id)
	require.NoError(t, err)
	c.Funded, c.Refunded = tot.Funded, tot.Refunded
	d := history.DiscountCampaign{ID: did, Budget: cfg.budget, Quota: cfg.quota, Max: 500, PerUserCount: 2, PerUserAmount: 600, RedisConfirmed: -1}
	if n, ok := dst["confirmed_count"].(float64); ok {
		d.RedisConfirmed, d.RedisSumConf = int64(n), int64(dst["confirmed_cents"].(float64))
	}
	require.NoError(t, l.Discounts(ctx, ledger.DiscountCampaign(did), func(x ledger.Discount) error {
		d.Confirmed = append(d.Confirmed, history.Discount{User: x.User, Order: x.Order, Seq: x.Seq, Cents: x.Cents})
		return nil
	}))
	dtot, err := l.Totals(ctx, ledger.DiscountCampaign(did))
	require.NoError(t, err)
	d.Funded, d.Refunded = dtot.Funded, dtot.Refunded
	balances := map[string]int64{}
	for _, op := range ops {
		if _, ok := balances[op.User]; ok {
			continue
		}
		if balances[op.User], err = l.Balance(ctx, ledger.UserAccount(op.User)); err != nil {
			require.NoError(t, err)
		}
	}
	return history.Final{Packets: []history.Campaign{c}, Discounts: []history.DiscountCampaign{d}, Balances: balances}
}

// dumpHistory writes the history as JSON lines to HONGBAO_HISTORY_DUMP,
// when set, for a look at what the checker found.
func dumpHistory(t *testing.T, ops []history.Op) {
	t.Helper()
	path := os.Getenv("HONGBAO_HISTORY_DUMP")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, op := range ops {
		require.NoError(t, enc.Encode(op))
	}
}

// transfers sums hongbao_shard_transfers_total over the serves.
func transfers(api *apiClient, serves []*serveBin) int64 {
	var sum int64
	for _, p := range serves {
		code, body, err := api.raw("GET", p.URL+"/metrics", api.admin)
		if err != nil || code != http.StatusOK {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "hongbao_shard_transfers_total "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += int64(f)
			}
		}
	}
	return sum
}

// TestClassify: how an HTTP answer becomes a history result.
func TestClassify(t *testing.T) {
	t.Parallel()
	errBody := func(code string) map[string]any { return map[string]any{"error": map[string]any{"code": code}} }
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		kind    history.Kind
		code    int
		m       map[string]any
		err     error
		result  history.Result
		outcome string
	}{
		{history.Grab, 200, map[string]any{"outcome": "granted", "packet_id": "c/1", "amount_cents": 7.0}, nil, history.OK, "granted"},
		{history.Held, 200, map[string]any{"packet_id": "c/1", "amount_cents": 7.0}, nil, history.OK, "held"},
		{history.Held, 404, errBody("no_grant"), nil, history.OK, history.NoGrant},
		{history.Confirm, 404, errBody("no_reservation"), nil, history.OK, history.NoReservation},
		{history.Cancel, 409, errBody("confirmed"), nil, history.OK, "confirmed"},
		{history.Grab, 503, errBody("outcome_unknown"), nil, history.Unknown, ""},
		{history.Grab, 503, errBody("busy"), nil, history.Unknown, ""},
		{history.Grab, 500, errBody("internal"), nil, history.Unknown, ""},
		{history.Grab, 0, nil, errors.New("read: connection reset by peer"), history.Unknown, ""},
		{history.Grab, 0, nil, dial, history.Fail, ""},
		{history.Grab, 429, errBody("rate_limited"), nil, history.Fail, ""},
		{history.Grab, 404, errBody("not_found"), nil, history.Fail, ""},
	} {
		op := history.Op{Kind: tc.kind}
		classify(&op, tc.code, tc.m, tc.err)
		require.Equal(t, tc.result, op.Result, "%d %v %v", tc.code, tc.m, tc.err)
		require.Equal(t, tc.outcome, op.Outcome, "%d %v %v", tc.code, tc.m, tc.err)
	}
}
