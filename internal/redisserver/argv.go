package redisserver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// busOffset is how far above its port a cluster node listens for the
// cluster bus (Redis's default cluster-port).
const busOffset = 10000

// Cluster nodes get ports from this range: below Linux's default ephemeral
// range (32768-60999) for both the port and the bus port, so an outgoing
// connection of a busy test never holds one of them by chance.
const (
	clusterPortMin = 12000
	clusterPortMax = 22767
)

func (opt Options) validate() error {
	switch opt.AOF {
	case "", "always", "everysec", "no", "off":
	default:
		return fmt.Errorf("redisserver: AOF must be always, everysec, no or off, not %q", opt.AOF)
	}
	if opt.Password != "" && (opt.Config != "" || opt.Sentinel) {
		return errors.New("redisserver: a Password goes with neither Config nor Sentinel")
	}
	for _, c := range opt.Password {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return errors.New("redisserver: a Password is of A-Z a-z 0-9 - _ only")
		}
	}
	if opt.Cluster && opt.Sentinel {
		return errors.New("redisserver: a server is a cluster node or a sentinel, not both")
	}
	maxPort := 65535
	if opt.Cluster {
		maxPort -= busOffset
	}
	if opt.Port < 0 || opt.Port > maxPort {
		return fmt.Errorf("redisserver: port %d is out of range 0-%d", opt.Port, maxPort)
	}
	return nil
}

// argv builds the server's arguments and writes its configuration file
// when it has one.
func (s *Server) argv(port int, opt Options) ([]string, error) {
	var args []string
	if opt.Config != "" || opt.Sentinel {
		conf := filepath.Join(s.Dir, "redis.conf")
		if _, err := os.Stat(conf); os.IsNotExist(err) {
			if err := os.WriteFile(conf, []byte(opt.Config), 0o600); err != nil {
				return nil, fmt.Errorf("redisserver: %w", err)
			}
		}
		args = append(args, conf)
	}
	if opt.Password != "" {
		// In a file of the owner's, not on the command line.
		conf := filepath.Join(s.Dir, "auth.conf")
		if err := writePrivate(conf, "requirepass "+opt.Password+"\n"); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		args = append(args, conf)
	}
	if opt.Sentinel {
		args = append(args, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--pidfile", filepath.Join(s.Dir, "redis.pid"),
		"--logfile", "redis.log",
		"--daemonize", "no",
	)
	if !opt.Sentinel {
		args = append(args, "--save", "", "--maxmemory-policy", "noeviction")
		switch opt.AOF {
		case "off":
			args = append(args, "--appendonly", "no")
		case "":
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		default:
			args = append(args, "--appendonly", "yes", "--appendfsync", opt.AOF)
		}
		if opt.NoAOFRewrite {
			args = append(args, "--auto-aof-rewrite-percentage", "0")
		}
	}
	if opt.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	return append(args, opt.Args...), nil
}

// writePrivate writes text to path with mode 0600, whatever mode an
// earlier file there had.
func writePrivate(path, text string) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// FreePort returns a loopback port that is free now. Another process may
// take it before it is used; callers that bind it later retry on failure.
func FreePort() (int, error) { return freePort() }

// pickPort returns a free port; for a cluster node one whose bus port is
// free too.
func pickPort(cluster bool) (int, error) {
	if !cluster {
		return freePort()
	}
	for i := 0; i < 100; i++ {
		port := clusterPortMin + rand.IntN(clusterPortMax-clusterPortMin+1)
		if portFree(port) && portFree(port+busOffset) {
			return port, nil
		}
	}
	return 0, errors.New("redisserver: no free port with a free cluster bus port")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
