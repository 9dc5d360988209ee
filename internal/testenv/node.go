package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// startTimeout bounds the start of a whole topology: every process, the
// join, and the wait until it is ready.
const startTimeout = 60 * time.Second

// Node is one redis-server of a topology started by NewCluster or
// NewSentinel. Its address stays the same across Kill and Restart.
type Node struct {
	// Addr is host:port on loopback.
	Addr string
	// Client talks to this node alone, never following redirects or
	// discovering other nodes (ForceSingleClient). It reconnects by itself
	// after a Restart.
	Client rueidis.Client

	mu  sync.Mutex
	srv *redisserver.Server
	opt redisserver.Options
}

// options are the options of a topology (ClusterOptions,
// SentinelOptions).
type options[O any] interface {
	Validate() error
	withDefaults() O
}

// topologyOptions begins a topology's start: it skips the test where no
// redis-server is installed, fails it on options that cannot make the
// topology, and returns the options with their defaults.
func topologyOptions[O options[O]](t testing.TB, opt O) O {
	t.Helper()
	need(t)
	if err := opt.Validate(); err != nil {
		t.Fatal(err)
	}
	return opt.withDefaults()
}

// checkAOF checks a topology's AOF option: a persistence redisserver
// takes, or empty for "off".
func checkAOF(aof string) error {
	switch aof {
	case "", "always", "everysec", "no", "off":
		return nil
	}
	return fmt.Errorf("testenv: AOF must be always, everysec, no or off, not %q", aof)
}

// startNodes starts one server per option in parallel. Every server that
// started is stopped when the test ends, also when another failed.
func startNodes(ctx context.Context, t testing.TB, opts []redisserver.Options) ([]*Node, error) {
	t.Helper()
	nodes := make([]*Node, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, opt := range opts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := redisserver.Start(ctx, opt)
			if err != nil {
				errs[i] = err
				return
			}
			opt.Port = portOf(srv.Addr)
			nodes[i] = &Node{Addr: srv.Addr, srv: srv, opt: opt}
		}()
	}
	wg.Wait()
	var started []*Node
	for _, n := range nodes {
		if n != nil {
			started = append(started, n)
		}
	}
	t.Cleanup(func() { stopNodes(started) })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		n.Client = nodeClient(t, n.Addr)
	}
	return nodes, nil
}

// stopNodes stops the nodes in parallel.
func stopNodes(nodes []*Node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
}

// nodeClient connects to addr alone; the client is closed when the test
// ends.
func nodeClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}

// Server is the running server process (a new one after each Restart).
func (n *Node) Server() *redisserver.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Running reports whether the node's process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return false
	}
	select {
	case <-n.srv.Exited():
		return false
	default:
		return true
	}
}

// Kill ends the node with SIGKILL, as a crash would, and waits until it is
// gone. Its data directory stays for a Restart.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Kill()
	}
}

// Restart starts a stopped or killed node again on the same address and
// data directory (AOF, nodes.conf and sentinel state included), with the
// arguments it first started with, and waits until it answers PING.
func (n *Node) Restart(ctx context.Context) error { return n.restart(ctx) }

// restart starts the node again with extra arguments for this start only.
func (n *Node) restart(ctx context.Context, extra ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		select {
		case <-n.srv.Exited():
		default:
			return fmt.Errorf("testenv: restart %s: it is still running", n.Addr)
		}
	}
	opt := n.opt
	opt.Args = append(append([]string{}, opt.Args...), extra...)
	srv, err := redisserver.Start(ctx, opt)
	if err != nil {
		return fmt.Errorf("testenv: restart %s: %w", n.Addr, err)
	}
	n.srv = srv
	return nil
}

// Stop shuts the node down (SHUTDOWN, then signals) and waits for it.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		_ = n.srv.Stop()
	}
}

// logs returns the tails of the nodes' logs, for a failure message.
func logs(nodes ...*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		srv := n.Server()
		if srv == nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- %s (%s) log tail:\n%s", n.Addr, srv.Dir, srv.LogTail(8))
	}
	return b.String()
}

// waitFor polls cond every 20 ms until it reports done, ctx ends, or the
// timeout passes; the error names what was awaited and the last state seen.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "nothing yet"
	for {
		done, state := cond(ctx)
		if done {
			return nil
		}
		if ctx.Err() == nil { // a check cut short by the deadline says nothing
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: %s: not reached within %v (%w); last seen: %s", what, timeout, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// info returns the fields of INFO section as a map.
func info(ctx context.Context, c rueidis.Client, section string) (map[string]string, error) {
	s, err := text(c.Do(ctx, c.B().Info().Section(section).Build()))
	if err != nil {
		return nil, err
	}
	return parseFields(s, ':'), nil
}

// text returns a string reply; a RESP3 verbatim string (INFO, CLUSTER
// INFO, CLUSTER NODES) comes without its "txt:" format prefix.
func text(r rueidis.RedisResult) (string, error) {
	s, err := r.ToString()
	return strings.TrimPrefix(s, "txt:"), err
}

// parseFields parses "name<sep>value" lines (INFO, CLUSTER INFO).
func parseFields(s string, sep byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.IndexByte(line, sep); i > 0 && !strings.HasPrefix(line, "#") {
			m[line[:i]] = line[i+1:]
		}
	}
	return m
}

// replOffset is the replication offset a server has processed: the
// master's own offset on a master, what it received on a replica.
func replOffset(ctx context.Context, c rueidis.Client) (role string, offset int64, linkUp bool, err error) {
	f, err := info(ctx, c, "replication")
	if err != nil {
		return "", 0, false, err
	}
	role = f["role"]
	field := "master_repl_offset"
	if role == "slave" {
		field = "slave_repl_offset"
	}
	offset, err = strconv.ParseInt(f[field], 10, 64)
	if err != nil {
		return role, 0, false, fmt.Errorf("testenv: INFO replication has no %s: %w", field, err)
	}
	return role, offset, f["master_link_status"] == "up", nil
}

// waitReplicated waits until every replica is linked to a master and has
// processed the master's replication offset as it was when the call began.
func waitReplicated(ctx context.Context, timeout time.Duration, master *Node, replicas []*Node) error {
	_, want, _, err := replOffset(ctx, master.Client)
	if err != nil {
		return fmt.Errorf("testenv: replication offset of %s: %w", master.Addr, err)
	}
	err = waitFor(ctx, timeout, fmt.Sprintf("replicas of %s at offset %d", master.Addr, want), func(ctx context.Context) (bool, string) {
		var behind []string
		for _, r := range replicas {
			role, off, up, err := replOffset(ctx, r.Client)
			if err != nil || role != "slave" || !up || off < want {
				behind = append(behind, fmt.Sprintf("%s role=%s link-up=%v offset=%d err=%v", r.Addr, role, up, off, err))
			}
		}
		return len(behind) == 0, strings.Join(behind, "; ")
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logs(append([]*Node{master}, replicas...)...))
	}
	return nil
}
