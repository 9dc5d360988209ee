package testenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// SentinelOptions configure NewSentinel. The zero value is a master, one
// replica and three sentinels that fail over within a few seconds.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor the master under.
	// Default "hb".
	MasterName string
	// Replicas is the number of replicas. Default 1 (a failover needs one).
	Replicas int
	// Sentinels is the number of sentinels. Default 3.
	Sentinels int
	// Quorum is how many sentinels must find the master down to start a
	// failover. Default a majority of Sentinels.
	Quorum int
	// DownAfter is down-after-milliseconds: how long the master may not
	// answer before a sentinel finds it down. Default 1s, quick yet
	// longer than a busy machine makes a healthy Redis wait.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout; a failed attempt is retried
	// after twice this. Default 3s.
	FailoverTimeout time.Duration
	// AOF is the data nodes' persistence, as in redisserver.Options.AOF,
	// but empty means "off"; ask for "always" explicitly.
	AOF string
	// Args are extra redis-server arguments for the master and replicas.
	Args []string
}

// Validate reports options that cannot make a monitored setup.
func (o SentinelOptions) Validate() error {
	switch {
	case o.Replicas < 0 || o.Replicas > 8:
		return fmt.Errorf("testenv: Replicas must be 1-8 (0 for 1), not %d", o.Replicas)
	case o.Sentinels < 0 || o.Sentinels > 9:
		return fmt.Errorf("testenv: Sentinels must be 1-9 (0 for 3), not %d", o.Sentinels)
	case o.Quorum < 0 || (o.Sentinels > 0 && o.Quorum > o.Sentinels) || (o.Sentinels == 0 && o.Quorum > 3):
		return fmt.Errorf("testenv: Quorum must be at most Sentinels, not %d", o.Quorum)
	case o.DownAfter < 0 || o.FailoverTimeout < 0:
		return fmt.Errorf("testenv: DownAfter and FailoverTimeout must not be negative")
	case strings.ContainsAny(o.MasterName, " \t\r\n\"'&?#/"):
		return fmt.Errorf("testenv: MasterName %q must be a plain word", o.MasterName)
	}
	return checkAOF(o.AOF)
}

func (o SentinelOptions) withDefaults() SentinelOptions {
	o.MasterName = cmp.Or(o.MasterName, "hb")
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.Sentinels = cmp.Or(o.Sentinels, 3)
	o.Quorum = cmp.Or(o.Quorum, o.Sentinels/2+1)
	o.DownAfter = cmp.Or(o.DownAfter, time.Second)
	o.FailoverTimeout = cmp.Or(o.FailoverTimeout, 3*time.Second)
	o.AOF = cmp.Or(o.AOF, "off")
	return o
}

// Sentinel is a master, its replicas and the sentinels that watch them,
// all private redis-server processes.
type Sentinel struct {
	// Name is the master name the sentinels monitor.
	Name string
	// Data are the master and its replicas: Data[0] was the master at the
	// start. Roles change after a failover; the order does not.
	Data []*Node
	// Sentinels are the sentinel processes.
	Sentinels []*Node
	// URL is the address of the setup for rueidis.ParseURL:
	// redis://S1?master_set=NAME&addr=S2&addr=S3.
	URL string
	// Client is made from URL, as a deployment would make it: it asks the
	// sentinels for the master and follows it through failovers.
	Client rueidis.Client

	opt    SentinelOptions
	mu     sync.Mutex
	master string
}

// NewSentinel starts a monitored setup for this test: the master, then its
// replicas, and once they are in sync the sentinels, each told of the
// replicas and of the other sentinels up front so that none has to wait
// for discovery. It returns once every sentinel names the master, sees the
// replicas healthy and knows the other sentinels. Everything stops when
// the test ends, sentinels first so that no failover starts meanwhile.
func NewSentinel(t testing.TB, opt SentinelOptions) *Sentinel {
	t.Helper()
	opt = topologyOptions(t, opt)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s := &Sentinel{Name: opt.MasterName, opt: opt}
	if err := s.startData(ctx, t); err != nil {
		t.Fatalf("testenv: sentinel setup: %v%s", err, logs(s.Data...))
	}
	if err := s.startSentinels(ctx, t); err != nil {
		t.Fatalf("testenv: sentinel setup: %v%s", err, logs(append(s.Data, s.Sentinels...)...))
	}
	s.URL = sentinelURL(s.Name, s.SentinelAddrs())
	copt, err := rueidis.ParseURL(s.URL)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", s.URL, err)
	}
	if s.Client, err = rueidis.NewClient(copt); err != nil {
		t.Fatalf("testenv: sentinel client: %v%s", err, logs(s.Sentinels...))
	}
	t.Cleanup(s.Client.Close)
	return s
}

// sentinelURL is the form rueidis.ParseURL reads: the first sentinel as the
// host, the others as addr parameters, the master name as master_set.
func sentinelURL(name string, sentinels []string) string {
	u := "redis://" + sentinels[0] + "?master_set=" + url.QueryEscape(name)
	for _, a := range sentinels[1:] {
		u += "&addr=" + a
	}
	return u
}

func (s *Sentinel) startData(ctx context.Context, t testing.TB) error {
	t.Helper()
	dataOpt := func() redisserver.Options {
		// A replica's first sync would wait 5 s for other replicas to join.
		args := append([]string{"--repl-diskless-sync-delay", "0"}, s.opt.Args...)
		return redisserver.Options{Dir: t.TempDir(), AOF: s.opt.AOF, Args: args}
	}
	master, err := startNodes(ctx, t, []redisserver.Options{dataOpt()})
	if err != nil {
		return fmt.Errorf("start master: %w", err)
	}
	s.Data, s.master = master, master[0].Addr
	opts := make([]redisserver.Options, s.opt.Replicas)
	for i := range opts {
		opts[i] = dataOpt()
		opts[i].Args = append(opts[i].Args, "--replicaof", "127.0.0.1", strconv.Itoa(portOf(s.master)))
	}
	replicas, err := startNodes(ctx, t, opts)
	if err != nil {
		return fmt.Errorf("start replicas: %w", err)
	}
	s.Data = append(s.Data, replicas...)
	// The sentinels learn the replicas from the master's INFO at their
	// first contact; in sync before then, none is missed.
	return waitReplicated(ctx, 30*time.Second, s.Data[0], replicas)
}

func (s *Sentinel) startSentinels(ctx context.Context, t testing.TB) error {
	t.Helper()
	n := s.opt.Sentinels
	ports, ids := make([]int, n), make([]string, n)
	for i := range n {
		p, err := redisserver.FreePort()
		if err != nil {
			return err
		}
		var b [20]byte
		_, _ = rand.Read(b[:])
		ports[i], ids[i] = p, hex.EncodeToString(b[:])
	}
	opts := make([]redisserver.Options, n)
	for i := range opts {
		opts[i] = redisserver.Options{Dir: t.TempDir(), Port: ports[i], Sentinel: true, Config: s.sentinelConfig(i, ports, ids)}
	}
	nodes, err := startNodes(ctx, t, opts)
	if err != nil {
		// A port taken since it was found free: start again on others.
		if nodes, err = s.retrySentinels(ctx, t, opts); err != nil {
			return fmt.Errorf("start sentinels: %w", err)
		}
	}
	// startNodes stops them when the test ends: before the data nodes,
	// since cleanups run last first, so no failover starts meanwhile.
	s.Sentinels = nodes
	return waitFor(ctx, 30*time.Second, "sentinels ready", s.ready)
}

// retrySentinels starts the sentinels on ports chosen at start; they then
// find each other by their hello messages instead of from the config.
func (s *Sentinel) retrySentinels(ctx context.Context, t testing.TB, opts []redisserver.Options) ([]*Node, error) {
	t.Helper()
	for i := range opts {
		opts[i].Dir, opts[i].Port = t.TempDir(), 0
	}
	return startNodes(ctx, t, opts)
}

func (s *Sentinel) sentinelConfig(i int, ports []int, ids []string) string {
	o, name := s.opt, s.opt.MasterName
	var b strings.Builder
	fmt.Fprintf(&b, "sentinel myid %s\n", ids[i])
	fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d %d\n", name, portOf(s.master), o.Quorum)
	fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", name, o.DownAfter.Milliseconds())
	fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", name, o.FailoverTimeout.Milliseconds())
	fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", name)
	for _, r := range s.Data[1:] {
		fmt.Fprintf(&b, "sentinel known-replica %s 127.0.0.1 %d\n", name, portOf(r.Addr))
	}
	for j := range ports {
		if j != i {
			fmt.Fprintf(&b, "sentinel known-sentinel %s 127.0.0.1 %d %s\n", name, ports[j], ids[j])
		}
	}
	return b.String()
}

// ready reports whether every sentinel names the expected master, sees
// the replicas healthy and knows the other sentinels.
func (s *Sentinel) ready(ctx context.Context) (bool, string) {
	master := s.Master()
	for _, sn := range s.Sentinels {
		if problem := s.notReady(ctx, sn, master); problem != "" {
			return false, sn.Addr + ": " + problem
		}
	}
	return true, ""
}

func (s *Sentinel) notReady(ctx context.Context, sn *Node, master string) string {
	m, err := fieldMap(do(ctx, sn.Client, "SENTINEL", "MASTER", s.Name))
	if err != nil {
		return err.Error()
	}
	if addr := m["ip"] + ":" + m["port"]; addr != master || m["flags"] != "master" {
		return fmt.Sprintf("master %s flags %s, want %s", addr, m["flags"], master)
	}
	replicas, err := fieldMaps(do(ctx, sn.Client, "SENTINEL", "REPLICAS", s.Name))
	if err != nil {
		return err.Error()
	}
	var healthy []string
	for _, r := range replicas {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			healthy = append(healthy, r["ip"]+":"+r["port"])
		}
	}
	if want := s.runningReplicas(master); !sameSet(healthy, want) {
		return fmt.Sprintf("healthy replicas %v, want %v", healthy, want)
	}
	others, err := fieldMaps(do(ctx, sn.Client, "SENTINEL", "SENTINELS", s.Name))
	if err != nil {
		return err.Error()
	}
	var known []string
	for _, o := range others {
		if o["flags"] == "sentinel" {
			known = append(known, o["ip"]+":"+o["port"])
		}
	}
	var want []string
	for _, o := range s.Sentinels {
		if o != sn && o.Running() {
			want = append(want, o.Addr)
		}
	}
	if !sameSet(known, want) {
		return fmt.Sprintf("healthy sentinels %v, want %v", known, want)
	}
	return ""
}

func (s *Sentinel) runningReplicas(master string) []string {
	var addrs []string
	for _, n := range s.Data {
		if n.Addr != master && n.Running() {
			addrs = append(addrs, n.Addr)
		}
	}
	return addrs
}

// Master returns the master's address as last established: at the start,
// or by the latest WaitFailover.
func (s *Sentinel) Master() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.master
}

// MasterNode returns the master's node as last established.
func (s *Sentinel) MasterNode() *Node { return s.Node(s.Master()) }

// Node returns the data node or sentinel at addr, or nil.
func (s *Sentinel) Node(addr string) *Node {
	for _, n := range append(append([]*Node{}, s.Data...), s.Sentinels...) {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	return addrs
}

// KillMaster ends the master with SIGKILL, as a crash would, and returns
// its address. The sentinels fail over after DownAfter and an election.
func (s *Sentinel) KillMaster() string {
	addr := s.Master()
	s.Node(addr).Kill()
	return addr
}

// RestartAsReplica starts a killed or stopped data node again as a replica
// of the current master (--replicaof), as an operator brings a failed
// master back. Its data from before is replaced by the master's at the
// first sync. A plain Node.Restart brings an old master back as a master
// with its data; the sentinels make it a replica only after about 8 s
// (Redis waits four hello periods), and it takes writes meanwhile.
func (s *Sentinel) RestartAsReplica(ctx context.Context, addr string) error {
	n := s.Node(addr)
	if n == nil || n.opt.Sentinel {
		return fmt.Errorf("testenv: %s is not a data node", addr)
	}
	master := s.Master()
	return n.restart(ctx, "--replicaof", "127.0.0.1", strconv.Itoa(portOf(master)))
}

// Failover asks a sentinel for a failover without waiting for the master
// to fail (SENTINEL FAILOVER); WaitFailover waits for it to complete.
func (s *Sentinel) Failover(ctx context.Context) error {
	for _, sn := range s.Sentinels {
		if sn.Running() {
			return do(ctx, sn.Client, "SENTINEL", "FAILOVER", s.Name).Error()
		}
	}
	return fmt.Errorf("testenv: no sentinel is running")
}

// WaitFailover waits (at most 30 s, or until ctx ends) until every running
// sentinel names the same master, other than the one before, and that
// master answers ROLE as master. It returns the new master's address,
// which Master returns from then on.
func (s *Sentinel) WaitFailover(ctx context.Context) (string, error) {
	old := s.Master()
	var found string
	err := waitFor(ctx, 30*time.Second, "failover from "+old, func(ctx context.Context) (bool, string) {
		addr, state := s.agreedMaster(ctx)
		if addr == "" || addr == old {
			return false, state
		}
		n := s.Node(addr)
		if n == nil {
			return false, "sentinels name unknown master " + addr
		}
		role, err := do(ctx, n.Client, "ROLE").ToArray()
		if err != nil || len(role) == 0 {
			return false, fmt.Sprintf("ROLE on %s: %v", addr, err)
		}
		if r, _ := role[0].ToString(); r != "master" {
			return false, fmt.Sprintf("%s answers ROLE %s", addr, r)
		}
		found = addr
		return true, ""
	})
	if err != nil {
		return "", fmt.Errorf("%w%s", err, logs(s.Sentinels...))
	}
	s.mu.Lock()
	s.master = found
	s.mu.Unlock()
	return found, nil
}

// agreedMaster returns the master every running sentinel names, or "" and
// what they said.
func (s *Sentinel) agreedMaster(ctx context.Context) (string, string) {
	var names []string
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		a, err := do(ctx, sn.Client, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name).AsStrSlice()
		if err != nil || len(a) != 2 {
			return "", fmt.Sprintf("%s: %v %v", sn.Addr, a, err)
		}
		names = append(names, a[0]+":"+a[1])
	}
	for _, n := range names {
		if n != names[0] {
			return "", fmt.Sprintf("sentinels name %v", names)
		}
	}
	if len(names) == 0 {
		return "", "no sentinel is running"
	}
	return names[0], fmt.Sprintf("sentinels name %s", names[0])
}

// WaitSentinels waits (at most 30 s) until every running sentinel names
// Master, sees the running replicas healthy and knows the other running
// sentinels, as NewSentinel does at the start. After a restart it can take
// 10 s or more: a sentinel asks a replica for INFO only every 10 s, and
// turns a returning old master into a replica only after about 8 s.
func (s *Sentinel) WaitSentinels(ctx context.Context) error {
	return waitFor(ctx, 30*time.Second, "sentinels settled", s.ready)
}

// MasterOffset returns the master's replication offset (master_repl_offset):
// how far the write stream that replicas copy has got.
func (s *Sentinel) MasterOffset(ctx context.Context) (int64, error) {
	_, off, _, err := replOffset(ctx, s.MasterNode().Client)
	return off, err
}

// ReplicaOffsets returns, for every running replica, the offset of the
// master's stream it has processed.
func (s *Sentinel) ReplicaOffsets(ctx context.Context) (map[string]int64, error) {
	offs := map[string]int64{}
	for _, addr := range s.runningReplicas(s.Master()) {
		_, off, _, err := replOffset(ctx, s.Node(addr).Client)
		if err != nil {
			return nil, fmt.Errorf("testenv: offset of %s: %w", addr, err)
		}
		offs[addr] = off
	}
	return offs, nil
}

// WaitReplicated waits (at most a minute) until every running replica is linked
// to the master and has processed all the master had written when the call
// began: a write acknowledged before the call survives a failover after
// it.
func (s *Sentinel) WaitReplicated(ctx context.Context) error {
	var replicas []*Node
	for _, addr := range s.runningReplicas(s.Master()) {
		replicas = append(replicas, s.Node(addr))
	}
	// A restarted node loads its data and syncs in full before its link is
	// up: a minute, for a machine running the whole suite on two cores.
	return waitReplicated(ctx, time.Minute, s.MasterNode(), replicas)
}

// fieldMap reads a flat name, value, name, value ... reply (SENTINEL
// MASTER) into a map; under RESP3 it may come as a map already.
func fieldMap(r rueidis.RedisResult) (map[string]string, error) {
	msg, err := r.ToMessage()
	if err != nil {
		return nil, err
	}
	return toFields(msg)
}

func fieldMaps(r rueidis.RedisResult) ([]map[string]string, error) {
	arr, err := r.ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(arr))
	for _, m := range arr {
		f, err := toFields(m)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func toFields(m rueidis.RedisMessage) (map[string]string, error) {
	if m.IsMap() {
		return m.AsStrMap()
	}
	kv, err := m.AsStrSlice()
	if err != nil {
		return nil, err
	}
	f := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		f[kv[i]] = kv[i+1]
	}
	return f, nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = append([]string{}, a...), append([]string{}, b...)
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
