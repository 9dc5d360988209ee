package redisserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClusterNode: a cluster node listens on a port and on its bus port
// port+10000, and keeps its nodes.conf in its data directory.
func TestClusterNode(t *testing.T) {
	t.Parallel()
	need(t)
	s, err := Start(context.Background(), Options{Cluster: true, AOF: "off"})
	require.NoError(t, err)
	defer s.Stop()
	require.Contains(t, command(t, s.Addr, "CLUSTER", "INFO"), "cluster_state")
	_, port, err := net.SplitHostPort(s.Addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	require.LessOrEqual(t, p+busOffset, 65535)
	bus, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+busOffset)), time.Second)
	require.NoError(t, err, "the cluster bus listens")
	bus.Close()
	_, err = os.Stat(filepath.Join(s.Dir, "nodes.conf"))
	require.NoError(t, err)
}

// TestFixedPortRestart: a server stopped and started again with its port
// and data directory is the same server at the same address.
func TestFixedPortRestart(t *testing.T) {
	t.Parallel()
	need(t)
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{Dir: dir, AOF: "everysec"})
	require.NoError(t, err)
	require.Contains(t, command(t, s.Addr, "SET", "k", "v"), "OK")
	addr := s.Addr
	require.NoError(t, s.Stop())

	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	s, err = Start(context.Background(), Options{Dir: dir, AOF: "everysec", Port: p})
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, addr, s.Addr)
	require.Contains(t, command(t, s.Addr, "GET", "k"), "v")

	// The port is taken now: a second server on it fails at once, though
	// the first one answers there.
	_, err = Start(context.Background(), Options{AOF: "off", Port: p})
	require.ErrorContains(t, err, "taken by another server")
}

// TestSentinelMode: a sentinel reads its monitor directives from Config
// and records what it learns in that file.
func TestSentinelMode(t *testing.T) {
	t.Parallel()
	need(t)
	s, err := Start(context.Background(), Options{
		Sentinel: true,
		// Port 1 on loopback never answers: a monitored master that is down.
		Config: "sentinel monitor m1 127.0.0.1 1 1\n",
	})
	require.NoError(t, err)
	defer s.Stop()
	require.Contains(t, command(t, s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m1"), "127.0.0.1")
	conf, err := os.ReadFile(filepath.Join(s.Dir, "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), "sentinel myid", "the sentinel rewrote its config")
}

func TestBadTopologyOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{"cluster and sentinel", Options{Cluster: true, Sentinel: true}, "not both"},
		{"negative port", Options{Port: -1}, "out of range"},
		{"port too high", Options{Port: 70000}, "out of range"},
		{"no room for the bus port", Options{Cluster: true, Port: 60000}, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.opt.validate(), tc.want)
		})
	}
}
