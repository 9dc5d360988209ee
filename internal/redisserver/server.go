// Package redisserver starts and stops a private redis-server child process.
//
// It is the "embedded default" of the hongbao binary and the Redis of the
// tests: bound to loopback on a free port, AOF on with appendfsync always
// unless asked otherwise, in its own process group (so a Ctrl-C in the
// terminal reaches hongbao first and hongbao decides when Redis stops), and
// stopped by an explicit SHUTDOWN. The data directory holds a pidfile of the
// server and one of its owner, so the orphan of a crashed run is found and
// stopped before a new server uses the directory.
//
// The same process runs as a Redis Cluster node (Options.Cluster) or as a
// sentinel (Options.Sentinel, with its configuration in Options.Config) for
// the multi-process topologies of the tests; Options.Port restarts a
// server on the address it had.
package redisserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotInstalled means no redis-server binary was found.
var ErrNotInstalled = errors.New("redisserver: redis-server is not installed")

// Options configure a server. The zero value is a durable server in a
// temporary directory.
type Options struct {
	// Bin is the redis-server binary. Default: "redis-server" from PATH.
	Bin string
	// Dir is the data directory, created if missing and kept at Stop.
	// Default: a new temporary directory, removed at Stop.
	Dir string
	// AOF is "always" (default), "everysec", "no" (AOF on, the kernel
	// decides when to flush) or "off" (no AOF at all).
	AOF string
	// NoAOFRewrite turns automatic AOF rewrites off (benchmarks want that:
	// a rewrite in the middle of a run distorts it).
	NoAOFRewrite bool
	// CPUs pins the server to these CPUs with taskset (for example "0").
	// Empty: no pinning.
	CPUs string
	// Args are extra "--name value" arguments passed to redis-server.
	Args []string
	// Port is the port to listen on. Default 0: a free port, chosen again
	// if another process takes it before the server binds it. A set Port
	// is tried once (a restart on the same address wants exactly it).
	Port int
	// Config is the text of a configuration file, written to redis.conf
	// in the data directory when the directory has none yet and passed to
	// the server before the command-line arguments (which override it). A
	// restart keeps the file, which Redis may have rewritten: a sentinel
	// records what it learnt there.
	Config string
	// Cluster runs a Redis Cluster node (cluster-enabled, its own
	// nodes.conf in the data directory). A chosen port then also has its
	// cluster bus port, port+10000, free.
	Cluster bool
	// Sentinel runs a Redis Sentinel (redis-server --sentinel) instead of
	// a data server; its monitor directives go in Config. The persistence
	// options do not apply to it.
	Sentinel bool
	// Password, when set, locks the server: requirepass, written to
	// auth.conf (mode 0600) in the data directory, which is made 0700, so
	// no other local user can read the password, the AOF or the log, and
	// no local process connects without it. It is never on the command
	// line (other users can read that in /proc). Not with Config.
	// Default: no password (the tests' servers).
	Password string
}

// Server is a running redis-server child.
type Server struct {
	// Addr is host:port of the server, on loopback.
	Addr string
	// Dir is the data directory.
	Dir string
	// Password is Options.Password: what a client sends with AUTH.
	Password string

	cmd    *exec.Cmd
	tmp    bool
	exited chan struct{}
	err    error
}

// Available reports whether a redis-server binary can be found.
func Available(bin string) bool {
	if bin == "" {
		bin = "redis-server"
	}
	_, err := exec.LookPath(bin)
	return err == nil
}

const tempPrefix = "hongbao-redis-"

// Start launches a server and waits until it answers PING.
func Start(ctx context.Context, opt Options) (*Server, error) {
	bin := opt.Bin
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, ErrNotInstalled
	}
	if err := opt.validate(); err != nil {
		return nil, err
	}
	s := &Server{Password: opt.Password}
	if opt.Dir == "" {
		reapTempOrphans()
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		s.Dir, s.tmp = dir, true
	} else {
		dir, err := filepath.Abs(opt.Dir)
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		if err := reapOrphan(dir); err != nil {
			return nil, err
		}
		s.Dir = dir
	}
	if opt.Password != "" {
		// The directory holds the AOF (every campaign's seed and pool) and
		// auth.conf: its owner only.
		if err := os.Chmod(s.Dir, 0o700); err != nil {
			s.cleanup()
			return nil, fmt.Errorf("redisserver: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	// A free port can be taken between our probe and the server's bind;
	// try a few ports before giving up.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := opt.Port
		if port == 0 {
			if port, err = pickPort(opt.Cluster); err != nil {
				lastErr = err
				continue
			}
		}
		if err := s.launch(ctx, path, port, opt); err != nil {
			lastErr = err
			if ctx.Err() != nil || opt.Port != 0 {
				break
			}
			continue
		}
		return s, nil
	}
	s.cleanup()
	return nil, lastErr
}

func (s *Server) launch(ctx context.Context, path string, port int, opt Options) error {
	args, err := s.argv(port, opt)
	if err != nil {
		return err
	}
	name := path
	if opt.CPUs != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return fmt.Errorf("redisserver: pinning asked but taskset is missing: %w", err)
		}
		args = append([]string{"-c", opt.CPUs, path}, args...)
		name = ts
	}
	cmd := exec.Command(name, args...)
	// Own process group: a terminal's Ctrl-C goes to hongbao, not to Redis.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Dir = s.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisserver: start: %w", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	deadline := time.Now().Add(15 * time.Second)
	for {
		if ok, pid, _ := probe(s.Addr, s.Password, 200*time.Millisecond); ok {
			// A server that another process started on the port since we
			// found it free answers too; ours then fails to bind and exits.
			if pid != 0 && pid != cmd.Process.Pid {
				s.kill()
				return fmt.Errorf("redisserver: port %d is taken by another server (pid %d)", port, pid)
			}
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redisserver: redis-server exited at start: %v %s%s", s.err, strings.TrimSpace(out.String()), s.logTail())
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redisserver: redis-server did not answer PING within 15s%s", s.logTail())
		}
	}
}

// Pid is the process id of the server.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Stop shuts the server down with SHUTDOWN (which flushes the AOF), waits for
// it to exit, and removes a temporary data directory. It is safe to call
// more than once.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.exited:
	default:
		_ = sendShutdown(s.Addr, s.Password)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(5 * time.Second):
				s.kill()
			}
		}
	}
	s.cmd = nil
	s.cleanup()
	return nil
}

// Exited is closed when the server process has ended.
func (s *Server) Exited() <-chan struct{} { return s.exited }

func (s *Server) cleanup() {
	if s.tmp && s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
	} else if s.Dir != "" {
		_ = os.Remove(filepath.Join(s.Dir, "owner.pid"))
	}
}

func (s *Server) logTail() string {
	tail := s.LogTail(5)
	if tail == "" {
		return ""
	}
	return "; redis.log: " + strings.ReplaceAll(tail, "\n", " | ")
}

// LogTail returns the last n lines of the server's log, or "" when there is
// none (a temporary data directory is gone after Stop).
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisserver: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// resp encodes one command in RESP.
func resp(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

// auth is the AUTH command for password, or nothing without one.
func auth(password string) []byte {
	if password == "" {
		return nil
	}
	return resp("AUTH", password)
}

// probe sends PING and INFO server (after AUTH, with a password); it
// reports whether +PONG came back (LOADING does not count) and the process
// id of the server that answered (0 if INFO gave none).
func probe(addr, password string, timeout time.Duration) (bool, int, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	msg := append(auth(password), resp("PING")...)
	if _, err := c.Write(append(msg, resp("INFO", "server")...)); err != nil {
		return false, 0, err
	}
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := r.ReadString('\n'); err != nil { // AUTH's answer: PING tells
			return false, 0, err
		}
	}
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+PONG") {
		return false, 0, err
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return false, 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
		return true, 0, nil
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return false, 0, err
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return true, pid, nil
		}
	}
	return true, 0, nil
}

func sendShutdown(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write(append(auth(password), resp("SHUTDOWN")...))
	if err == nil && password != "" {
		_, _ = bufio.NewReader(c).ReadString('\n') // AUTH's answer
	}
	if err == nil {
		// The server closes the connection when it exits.
		_, _ = bufio.NewReader(c).ReadString('\n')
	}
	return err
}

// reapOrphan stops a redis-server left running in dir by a crashed owner.
// A server whose owner is still alive is in use: that is an error.
func reapOrphan(dir string) error {
	pid := readPid(filepath.Join(dir, "redis.pid"))
	if pid == 0 || !isRedis(pid) {
		return nil
	}
	if owner := readPid(filepath.Join(dir, "owner.pid")); owner != 0 && owner != os.Getpid() && alive(owner) {
		return fmt.Errorf("redisserver: data directory %s is in use by process %d", dir, owner)
	}
	// SIGTERM makes Redis flush the AOF and exit cleanly.
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// reapTempOrphans removes temporary data directories whose owner is gone,
// stopping the server left in them.
func reapTempOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		owner := readPid(filepath.Join(d, "owner.pid"))
		if owner == 0 || alive(owner) {
			continue
		}
		if reapOrphan(d) == nil {
			_ = os.RemoveAll(d)
		}
	}
}

func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return errors.Is(err, syscall.EPERM)
	}
	// A zombie still answers kill(0); it is not alive for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

func isRedis(pid int) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		// Without /proc we cannot tell; trust the pidfile.
		return true
	}
	return bytes.Contains(b, []byte("redis-server"))
}
