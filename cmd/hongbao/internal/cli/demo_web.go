package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
	"github.com/hongbao/hongbao/ledger"
)

// demoWeb is "hongbao demo --web": serve, on its own Redis and SQLite
// ledger in a temporary directory, with a rain that opens again when it
// sells out, a crowd of simulated users, the play page and the console,
// until Ctrl-C. It is serve itself: the same steps, the same shutdown
// (serve, then Redis), with the API's demo mode on.
type demoWeb struct {
	serveCmd
	rain  hongbao.Spec // every rain's spec, but its id
	crowd float64      // the crowd's grabs per second
	local string       // the API's address on loopback, for the crowd
	stamp string       // the start of the rains' ids

	mu      sync.Mutex
	current string // the open rain
	rains   int
	wg      sync.WaitGroup
}

// Defaults of demo --web when --total and --packets are not given: a rain
// one person and a small crowd empty in about a minute.
const (
	webDemoTotal   = "88.88"
	webDemoPackets = 50
)

// newDemoWeb checks the flags that apply to demo --web (set names the
// ones given on the command line) and builds the command.
func newDemoWeb(env *IO, f *demoFlags, set map[string]bool) (*demoWeb, error) {
	for _, name := range []string{"users", "clicks", "concurrency", "json", "seed", "settle"} {
		if set[name] {
			return nil, usageErrorf("--%s makes no sense with --web: people play, with a crowd of --crowd grabs a second", name)
		}
	}
	if f.crowd < 0 || f.crowd > 1000 {
		return nil, usageErrorf("--crowd must be within 0 and 1000 grabs a second")
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return nil, usageErrorf("--listen %q: %v", f.listen, err)
	}
	if !set["total"] {
		f.total = webDemoTotal
	}
	if !set["packets"] {
		f.packets = webDemoPackets
	}
	w := &demoWeb{crowd: f.crowd, stamp: "demo-" + strconv.FormatInt(time.Now().Unix()%1e8, 36)}
	w.env = env
	// serve's defaults, then what the demo sets.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	w.f.declare(fs)
	_ = fs.Parse(nil)
	w.f.listen, w.f.redis, w.f.ledger = f.listen, f.redis, f.ledger
	w.f.shutdownDelay = 0 // Ctrl-C from a person, no load balancer to wait for
	w.log = newLogger(env, f.logFormat)
	w.consumer = "demo-web"
	w.demo = &httpapi.Demo{Campaign: w.currentRain}
	w.announce = w.printBanner
	return w, nil
}

// currentRain is the id of the open rain.
func (w *demoWeb) currentRain() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// open makes the temporary directory, then opens serve in it. The
// directory goes last, after Redis has stopped.
func (w *demoWeb) open(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "hongbao-demo-web-")
	if err != nil {
		return err
	}
	w.deferClose(func() { _ = os.RemoveAll(dir) })
	w.f.dataDir = dir
	if err := w.serveCmd.open(ctx); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(w.ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	w.local = "http://" + net.JoinHostPort(host, port)
	return nil
}

// run opens the first rain, keeps rains coming and the crowd grabbing,
// and serves until ctx ends; then serve shuts down as it does.
func (w *demoWeb) run(ctx context.Context) error {
	if err := w.nextRain(ctx); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	w.wg.Add(1)
	go w.keepRaining(rctx)
	if w.crowd > 0 {
		w.wg.Add(1)
		go w.crowdGrabs(rctx)
	}
	err := w.serveCmd.run(ctx)
	stop()
	w.wg.Wait()
	return err
}

// nextRain opens a new rain and makes it the current one.
func (w *demoWeb) nextRain(ctx context.Context) error {
	w.mu.Lock()
	w.rains++
	spec := w.rain
	spec.ID = w.stamp + "-" + strconv.Itoa(w.rains)
	w.mu.Unlock()
	c, err := w.eng.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("open a rain: %w", err)
	}
	// As the API's create does: the fund entry first (the worker writes
	// it too when it comes first).
	if err := w.led.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}); err != nil {
		w.log.Warn("fund entry not written at create; settlement will write it", "campaign", c.ID, "err", err)
	}
	w.mu.Lock()
	w.current = c.ID
	w.mu.Unlock()
	return nil
}

// keepRaining opens the next rain once the current one has sold out (or
// closed), checking once a second.
func (w *demoWeb) keepRaining(ctx context.Context) {
	defer w.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id := w.currentRain()
		st, err := w.eng.Status(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("demo: reading the rain failed", "campaign", id, "err", err)
			}
			continue
		}
		if st.State != hongbao.StateClosed && st.State != hongbao.StateSettled {
			continue
		}
		if err := w.nextRain(ctx); err != nil {
			if ctx.Err() == nil {
				w.log.Error("demo: the next rain did not open", "err", err)
			}
			continue
		}
		fmt.Fprintf(w.env.Stdout, "%s %s (%s); the next rain opens: %s/play/%s\n",
			time.Now().Format("15:04:05"), id, strings.ReplaceAll(st.CloseReason, "_", " "), w.local, w.currentRain())
	}
}

// crowdGrabs lets simulated users grab the current rain over HTTP, one
// new user every 1/crowd seconds, as a platform's users would.
func (w *demoWeb) crowdGrabs(ctx context.Context) {
	defer w.wg.Done()
	t := time.NewTicker(time.Duration(float64(time.Second) / w.crowd))
	defer t.Stop()
	client := &http.Client{Timeout: 5 * time.Second}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			client.CloseIdleConnections()
			return
		case <-t.C:
		}
		tok, err := httpapi.MintToken(w.secrets[0], "crowd-"+strconv.Itoa(n), time.Hour, time.Now())
		if err != nil {
			w.log.Error("demo: crowd token", "err", err)
			return
		}
		req, err := http.NewRequestWithContext(ctx, "POST", w.local+"/v1/campaigns/"+w.currentRain()+"/grab", nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if res, err := client.Do(req); err == nil {
			_ = res.Body.Close()
		}
	}
}

// printBanner tells the person where to play and watch.
func (w *demoWeb) printBanner(addr net.Addr) {
	host, port, _ := net.SplitHostPort(addr.String())
	out := w.env.Stdout
	fmt.Fprintf(out, "hongbao demo --web: a red packet rain to play, served by hongbao serve on %s\n", w.local)
	fmt.Fprintf(out, "(Redis: %s; ledger: SQLite; both in a temporary directory, removed at the end)\n\n", w.conn.Kind)
	fmt.Fprintf(out, "  play      %s/play/%s\n", w.local, w.currentRain())
	fmt.Fprintf(out, "  console   %s/console/\n", w.local)
	fmt.Fprintf(out, "  admin key %s   (for the console; this run only)\n\n", w.adminKeys[0])
	fmt.Fprintf(out, "Each rain hands out %s in %d packets; when one sells out, the next opens (the play page offers it).\n",
		hongbao.FormatCents(w.rain.Total), w.rain.Count)
	if w.crowd > 0 {
		fmt.Fprintf(out, "A crowd of simulated users grabs %s a second (--crowd 0: play alone).\n", strconv.FormatFloat(w.crowd, 'f', -1, 64))
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		fmt.Fprintf(out, "To play from a phone on this network: --listen 0.0.0.0:%s, then open the play address with this machine's IP.\n", port)
	} else {
		fmt.Fprintf(out, "Listening on %s: anyone who reaches it can take demo tokens and play; the console needs the key.\n", addr)
	}
	fmt.Fprintln(out, "Ctrl-C stops serve, then Redis.")
}
