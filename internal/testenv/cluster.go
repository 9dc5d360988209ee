package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// ClusterOptions configure NewCluster. The zero value is three masters
// without replicas or persistence.
type ClusterOptions struct {
	// Masters is the number of masters; the slots are split evenly between
	// them in node order, in contiguous ranges. Default 3.
	Masters int
	// ReplicasPerMaster is the number of replicas of each master.
	// Default 0.
	ReplicasPerMaster int
	// AOF is every node's persistence, as in redisserver.Options.AOF, but
	// empty means "off" (the quickest); ask for "always" explicitly.
	AOF string
	// NodeTimeout is cluster-node-timeout: how long a node may stay silent
	// before it is failing and its replica takes over. Default 2s, short
	// for quick failovers yet long enough that a busy machine does not
	// fail a healthy node.
	NodeTimeout time.Duration
	// Args are extra redis-server arguments for every node.
	Args []string
}

// Validate reports options that cannot make a cluster.
func (o ClusterOptions) Validate() error {
	switch {
	case o.Masters < 0 || o.Masters > 64:
		return fmt.Errorf("testenv: Masters must be 1-64 (0 for 3), not %d", o.Masters)
	case o.ReplicasPerMaster < 0 || o.ReplicasPerMaster > 8:
		return fmt.Errorf("testenv: ReplicasPerMaster must be 0-8, not %d", o.ReplicasPerMaster)
	case o.NodeTimeout < 0 || (o.NodeTimeout > 0 && o.NodeTimeout < 100*time.Millisecond):
		return fmt.Errorf("testenv: NodeTimeout must be at least 100ms (0 for 2s), not %v", o.NodeTimeout)
	}
	return checkAOF(o.AOF)
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	o.Masters = cmp.Or(o.Masters, 3)
	o.AOF = cmp.Or(o.AOF, "off")
	o.NodeTimeout = cmp.Or(o.NodeTimeout, 2*time.Second)
	return o
}

// Cluster is a running Redis Cluster of private redis-server processes.
type Cluster struct {
	// Nodes are every node: first the masters as created (Nodes[:Masters]),
	// then the replicas, ReplicasPerMaster of them for master 0, then for
	// master 1, and so on. Roles change after a failover; the order does
	// not.
	Nodes []*Node
	// Client is a cluster client given the address of Nodes[0] alone: it
	// found the other nodes itself, as a deployment's client would.
	Client rueidis.Client
	// CreatedBy says how the cluster was made: "redis-cli" (redis-cli
	// --cluster create, as operators make one) or "testenv" (the same
	// steps sent by this package, for fewer than three masters, which
	// redis-cli refuses, or where redis-cli is not installed).
	CreatedBy string

	opt ClusterOptions
	ids map[string]string // node address to cluster node id
}

// NewCluster starts a cluster for this test: the nodes in parallel, each in
// its own data directory on a free loopback port whose bus port
// (port+10000) is free too, each a redis-server --cluster-enabled yes. With
// three masters or more it then runs redis-cli --cluster create on them
// (with --cluster-replicas ReplicasPerMaster), so the slots are laid out
// as an operator's cluster lays them out; with fewer, which redis-cli
// refuses, or without redis-cli (a failure under CI=true), it assigns the
// slots, joins the nodes and attaches the replicas itself, the same way.
// It returns once every node reports cluster_state:ok and all agree on the
// slots and the roles. The nodes stop when the test ends.
func NewCluster(t testing.TB, opt ClusterOptions) *Cluster {
	t.Helper()
	opt = topologyOptions(t, opt)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	opts := make([]redisserver.Options, opt.Masters*(1+opt.ReplicasPerMaster))
	for i := range opts {
		opts[i] = redisserver.Options{
			Dir:     t.TempDir(),
			AOF:     opt.AOF,
			Cluster: true,
			Args: append([]string{
				"--cluster-node-timeout", strconv.FormatInt(opt.NodeTimeout.Milliseconds(), 10),
				// A new replica's first sync would wait 5 s for others to join it.
				"--repl-diskless-sync-delay", "0",
			}, opt.Args...),
		}
	}
	nodes, err := startNodes(ctx, t, opts)
	if err != nil {
		t.Fatalf("testenv: start cluster nodes: %v", err)
	}
	c := &Cluster{Nodes: nodes, opt: opt, ids: map[string]string{}}
	cli, err := redisCLI(opt.Masters)
	if err != nil {
		t.Fatal(err)
	}
	if cli != "" {
		err = c.createWithCLI(ctx, cli)
	} else {
		err = c.create(ctx)
	}
	if err != nil {
		t.Fatalf("testenv: create cluster: %v%s", err, logs(nodes...))
	}
	c.Client = c.NewClient(t, rueidis.ClientOption{})
	return c
}

// redisCLI returns the path of redis-cli when a cluster of masters masters
// is to be made with it, or "" when testenv makes it itself: redis-cli
// refuses fewer than three masters. Missing redis-cli is an error under
// CI=true, where the suite must run as operators do.
func redisCLI(masters int) (string, error) {
	if masters < 3 {
		return "", nil
	}
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") == "true" {
			return "", errors.New("testenv: redis-cli is not installed; CI must have it (apt-get install -y redis-tools)")
		}
		return "", nil
	}
	return path, nil
}

// readIDs records every node's cluster node id.
func (c *Cluster) readIDs(ctx context.Context) error {
	for _, n := range c.Nodes {
		id, err := do(ctx, n.Client, "CLUSTER", "MYID").ToString()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", n.Addr, err)
		}
		c.ids[n.Addr] = id
	}
	return nil
}

// createWithCLI runs redis-cli --cluster create on the nodes, as an
// operator does: the masters first, in order (redis-cli takes the first
// Masters addresses of one host as masters and splits the slots between
// them in that order), then the replicas. redis-cli pairs replicas with
// masters as it likes; the replicas are then put in the documented order
// of Nodes.
func (c *Cluster) createWithCLI(ctx context.Context, cli string) error {
	if err := c.readIDs(ctx); err != nil {
		return err
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.opt.ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	c.CreatedBy = "redis-cli"
	if err := c.WaitConsistent(ctx); err != nil {
		return err
	}
	return c.orderReplicas(ctx)
}

// orderReplicas checks that Nodes[:Masters] are the masters and sorts the
// replicas after them: those of master 0 first, then those of master 1,
// and so on.
func (c *Cluster) orderReplicas(ctx context.Context) error {
	lines, err := c.view(ctx)
	if err != nil {
		return err
	}
	masterOf := map[string]string{} // replica address -> master address
	byID := map[string]string{}
	for _, l := range lines {
		byID[l.id] = l.addr
	}
	for _, l := range lines {
		if l.has("slave") {
			masterOf[l.addr] = byID[l.master]
		}
	}
	m := c.opt.Masters
	rank := map[string]int{}
	for i, n := range c.Nodes[:m] {
		if _, isReplica := masterOf[n.Addr]; isReplica {
			return fmt.Errorf("redis-cli made %s, node %d, a replica", n.Addr, i)
		}
		rank[n.Addr] = i
	}
	replicas := c.Nodes[m:]
	count := make([]int, m)
	for _, r := range replicas {
		i, ok := rank[masterOf[r.Addr]]
		if !ok {
			return fmt.Errorf("redis-cli left %s without a master of the first %d nodes", r.Addr, m)
		}
		if count[i]++; count[i] > c.opt.ReplicasPerMaster {
			return fmt.Errorf("redis-cli gave master %s more than %d replicas", c.Nodes[i].Addr, c.opt.ReplicasPerMaster)
		}
	}
	sort.SliceStable(replicas, func(a, b int) bool {
		return rank[masterOf[replicas[a].Addr]] < rank[masterOf[replicas[b].Addr]]
	})
	return nil
}

// create assigns the slots and epochs, joins the nodes and attaches the
// replicas: what redis-cli --cluster create does, without its fixed
// one-second waits and its three-master minimum.
func (c *Cluster) create(ctx context.Context) error {
	c.CreatedBy = "testenv"
	if err := c.readIDs(ctx); err != nil {
		return err
	}
	m := c.opt.Masters
	for i, n := range c.Nodes[:m] {
		lo, hi := SlotRange(i, m)
		if err := do(ctx, n.Client, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)).Error(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %w", n.Addr, err)
		}
	}
	// Distinct epochs up front: equal ones would be resolved by the nodes,
	// but only after a round of collisions.
	for i, n := range c.Nodes {
		if err := do(ctx, n.Client, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)).Error(); err != nil {
			return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", n.Addr, err)
		}
	}
	for _, n := range c.Nodes[1:] {
		if err := do(ctx, c.Nodes[0].Client, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(portOf(n.Addr))).Error(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", n.Addr, err)
		}
	}
	if err := waitFor(ctx, 30*time.Second, "every node knows every other", c.allKnown); err != nil {
		return err
	}
	for i, r := range c.Nodes[m:] {
		master := c.Nodes[i/c.opt.ReplicasPerMaster]
		if err := do(ctx, r.Client, "CLUSTER", "REPLICATE", c.ids[master.Addr]).Error(); err != nil {
			return fmt.Errorf("CLUSTER REPLICATE on %s: %w", r.Addr, err)
		}
	}
	return c.WaitConsistent(ctx)
}

func (c *Cluster) allKnown(ctx context.Context) (bool, string) {
	for _, n := range c.Nodes {
		lines, err := clusterNodes(ctx, n.Client)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", n.Addr, err)
		}
		known := 0
		for _, l := range lines {
			if l.id != "" && !l.has("handshake") && !l.has("noaddr") {
				known++
			}
		}
		if known != len(c.Nodes) {
			return false, fmt.Sprintf("%s knows %d of %d nodes", n.Addr, known, len(c.Nodes))
		}
	}
	return true, ""
}

// WaitConsistent waits (at most 30 s, or until ctx ends) until every
// running node reports cluster_state:ok, knows every node, sees every
// other running node healthy and connected, agrees with the others on each
// node's role, master and slots, has no slot half-migrated, and, if a
// replica, has its replication link up. Call it after killing, restarting
// or failing over nodes, before asserting where keys are.
func (c *Cluster) WaitConsistent(ctx context.Context) error {
	return waitFor(ctx, 30*time.Second, "cluster consistent", c.consistent)
}

func (c *Cluster) consistent(ctx context.Context) (bool, string) {
	var want, wantAt string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		f, err := clusterInfo(ctx, n.Client)
		if err != nil || f["cluster_state"] != "ok" {
			return false, fmt.Sprintf("%s: cluster_state %q, err %v", n.Addr, f["cluster_state"], err)
		}
		lines, err := clusterNodes(ctx, n.Client)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", n.Addr, err)
		}
		if problem := c.unhealthy(lines); problem != "" {
			return false, n.Addr + " sees " + problem
		}
		if self := mine(lines); self.has("slave") {
			if _, _, up, err := replOffset(ctx, n.Client); err != nil || !up {
				return false, fmt.Sprintf("replica %s: link up %v, err %v", n.Addr, up, err)
			}
		}
		view := summary(lines)
		if want == "" {
			want, wantAt = view, n.Addr
		} else if view != want {
			return false, fmt.Sprintf("%s and %s disagree:\n%s\nversus\n%s", wantAt, n.Addr, want, view)
		}
	}
	if want == "" {
		return false, "no node is running"
	}
	return true, ""
}

// unhealthy names what is wrong in one node's view, or returns "".
func (c *Cluster) unhealthy(lines []nodeLine) string {
	if len(lines) != len(c.Nodes) {
		return fmt.Sprintf("%d nodes, not %d", len(lines), len(c.Nodes))
	}
	for _, l := range lines {
		if l.open {
			return "slot migration open on " + l.addr
		}
		n := c.Node(l.addr)
		if n == nil || !n.Running() {
			continue
		}
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if l.has(bad) {
				return fmt.Sprintf("%s flagged %s", l.addr, strings.Join(l.flags, ","))
			}
		}
		if !l.has("myself") && !l.connected {
			return l.addr + " disconnected"
		}
	}
	return ""
}

// NewClient returns a cluster client with opt, closed when the test ends.
// An empty InitAddress becomes Nodes[0]'s address alone; DisableCache is
// always set (client-side caching is not what these tests exercise).
func (c *Cluster) NewClient(t testing.TB, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	if len(opt.InitAddress) == 0 {
		opt.InitAddress = []string{c.Nodes[0].Addr}
	}
	opt.DisableCache = true
	cl, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("testenv: cluster client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Addrs returns the addresses of all nodes, in Nodes order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// ID returns the cluster node id of the node at addr.
func (c *Cluster) ID(addr string) string { return c.ids[addr] }

// KillNode ends the node at addr with SIGKILL. It panics on an address
// that is not a node of the cluster.
func (c *Cluster) KillNode(addr string) { c.mustNode(addr).Kill() }

// RestartNode starts a killed or stopped node again on the same address
// with its data directory and nodes.conf, so it rejoins as the same node.
// It returns once the node answers PING; WaitConsistent waits for the
// cluster to take it back.
func (c *Cluster) RestartNode(ctx context.Context, addr string) error {
	return c.mustNode(addr).Restart(ctx)
}

func (c *Cluster) mustNode(addr string) *Node {
	n := c.Node(addr)
	if n == nil {
		panic(fmt.Sprintf("testenv: %s is not a node of the cluster", addr))
	}
	return n
}

// view returns CLUSTER NODES of the first running node.
func (c *Cluster) view(ctx context.Context) ([]nodeLine, error) {
	var errs []error
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		lines, err := clusterNodes(ctx, n.Client)
		if err == nil {
			return lines, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Addr, err))
	}
	return nil, fmt.Errorf("testenv: no node answers CLUSTER NODES: %w", errors.Join(errs...))
}

// MasterOfSlot returns the address of the master that owns slot, as the
// first running node sees it.
func (c *Cluster) MasterOfSlot(ctx context.Context, slot int) (string, error) {
	lines, err := c.view(ctx)
	if err != nil {
		return "", err
	}
	for _, l := range lines {
		if l.has("master") && l.owns(slot) {
			return l.addr, nil
		}
	}
	return "", fmt.Errorf("testenv: no master owns slot %d", slot)
}

// MasterOf returns the address of the master that owns key's slot.
func (c *Cluster) MasterOf(ctx context.Context, key string) (string, error) {
	return c.MasterOfSlot(ctx, KeySlot(key))
}

// SlotsOf returns the slots the master at addr owns, ascending.
func (c *Cluster) SlotsOf(ctx context.Context, addr string) ([]int, error) {
	lines, err := c.view(ctx)
	if err != nil {
		return nil, err
	}
	var slots []int
	for _, l := range lines {
		if l.addr == addr {
			for _, r := range l.slots {
				for s := r[0]; s <= r[1]; s++ {
					slots = append(slots, s)
				}
			}
		}
	}
	return slots, nil
}

// IDOn returns the first id of the form base-0, base-1, ... whose key(id)
// lands on a slot of the master at addr: a campaign id whose keys live on
// that master when key is the campaign's key builder.
func (c *Cluster) IDOn(ctx context.Context, addr, base string, key func(id string) string) (string, error) {
	slots, err := c.SlotsOf(ctx, addr)
	if err != nil {
		return "", err
	}
	if len(slots) == 0 {
		return "", fmt.Errorf("testenv: %s owns no slot", addr)
	}
	owned := make(map[int]bool, len(slots))
	for _, s := range slots {
		owned[s] = true
	}
	return findID(base, key, func(s int) bool { return owned[s] }), nil
}

// WaitReplicated waits until every running replica has processed what its
// master had written when the call began: a write acknowledged before the
// call survives the loss of its master after it.
func (c *Cluster) WaitReplicated(ctx context.Context) error {
	lines, err := c.view(ctx)
	if err != nil {
		return err
	}
	byID := map[string]string{}
	for _, l := range lines {
		byID[l.id] = l.addr
	}
	for _, l := range lines {
		master := c.Node(l.addr)
		if !l.has("master") || master == nil || !master.Running() {
			continue
		}
		var replicas []*Node
		for _, r := range lines {
			if n := c.Node(r.addr); r.has("slave") && byID[r.master] == l.addr && n != nil && n.Running() {
				replicas = append(replicas, n)
			}
		}
		if err := waitReplicated(ctx, 30*time.Second, master, replicas); err != nil {
			return err
		}
	}
	return nil
}

// Redirects counts the cluster errors the nodes replied with.
type Redirects struct {
	// Moved counts MOVED replies: a client asked a node for a slot it does
	// not own (stale slot map).
	Moved int64
	// Ask counts ASK replies: a key of a slot being migrated is already
	// on the target (or new), so the client must ask the target.
	Ask int64
	// TryAgain counts TRYAGAIN replies: a multi-key command (or script)
	// in a slot being migrated found its keys split between the nodes.
	TryAgain int64
}

// Redirects sums INFO errorstats over the running nodes: how many
// redirections and retries the nodes asked clients for since they started.
func (c *Cluster) Redirects(ctx context.Context) (Redirects, error) {
	var r Redirects
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		f, err := info(ctx, n.Client, "errorstats")
		if err != nil {
			return r, fmt.Errorf("testenv: INFO errorstats on %s: %w", n.Addr, err)
		}
		r.Moved += errorCount(f["errorstat_MOVED"])
		r.Ask += errorCount(f["errorstat_ASK"])
		r.TryAgain += errorCount(f["errorstat_TRYAGAIN"])
	}
	return r, nil
}

// errorCount parses "count=N" of an errorstat field.
func errorCount(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(v, "count="), 10, 64)
	return n
}

func do(ctx context.Context, c rueidis.Client, args ...string) rueidis.RedisResult {
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

func clusterInfo(ctx context.Context, c rueidis.Client) (map[string]string, error) {
	s, err := text(do(ctx, c, "CLUSTER", "INFO"))
	if err != nil {
		return nil, err
	}
	return parseFields(s, ':'), nil
}

// nodeLine is one node as a CLUSTER NODES line describes it.
type nodeLine struct {
	id, addr, master string
	flags            []string
	connected        bool
	slots            [][2]int
	open             bool // an [slot->-id] or [slot-<-id] entry
}

func (l nodeLine) has(flag string) bool {
	for _, f := range l.flags {
		if f == flag {
			return true
		}
	}
	return false
}

func (l nodeLine) owns(slot int) bool {
	for _, r := range l.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func clusterNodes(ctx context.Context, c rueidis.Client) ([]nodeLine, error) {
	s, err := text(do(ctx, c, "CLUSTER", "NODES"))
	if err != nil {
		return nil, err
	}
	var lines []nodeLine
	for _, raw := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(raw)
		if len(f) < 8 {
			return nil, fmt.Errorf("testenv: bad CLUSTER NODES line %q", raw)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		l := nodeLine{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], connected: f[7] == "connected"}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				l.open = true
				continue
			}
			lo, hi, found := strings.Cut(s, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("testenv: bad slot range %q in CLUSTER NODES", s)
			}
			l.slots = append(l.slots, [2]int{a, b})
		}
		lines = append(lines, l)
	}
	return lines, nil
}

func mine(lines []nodeLine) nodeLine {
	for _, l := range lines {
		if l.has("myself") {
			return l
		}
	}
	return nodeLine{}
}

// summary is what all nodes must agree on: each node's address, role,
// master and slots.
func summary(lines []nodeLine) string {
	rows := make([]string, len(lines))
	for i, l := range lines {
		role := "master"
		if l.has("slave") {
			role = "replica-of-" + l.master
		}
		rows[i] = fmt.Sprintf("%s %s %s %v", l.id, l.addr, role, l.slots)
	}
	sort.Strings(rows)
	return strings.Join(rows, "\n")
}
