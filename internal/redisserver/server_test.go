package redisserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func need(t *testing.T) {
	t.Helper()
	if !Available("") {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
}

// command sends one command and returns the first line of the reply and
// what follows it (for bulk replies).
func command(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err = c.Write([]byte(b.String()))
	require.NoError(t, err)
	r := bufio.NewReader(c)
	var out strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := 0; i < 5; i++ { // enough lines for a two-element array
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil || (i == 0 && !strings.HasPrefix(line, "*") && !strings.HasPrefix(line, "$")) || (i == 1 && strings.HasPrefix(out.String(), "$")) {
			break
		}
	}
	return out.String()
}

func TestStartStopDurableByDefault(t *testing.T) {
	t.Parallel()
	need(t)
	s, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	dir := s.Dir
	require.Contains(t, command(t, s.Addr, "CONFIG", "GET", "appendfsync"), "always")
	require.Contains(t, command(t, s.Addr, "CONFIG", "GET", "appendonly"), "yes")
	require.Contains(t, command(t, s.Addr, "CONFIG", "GET", "maxmemory-policy"), "noeviction")
	require.Contains(t, command(t, s.Addr, "CONFIG", "GET", "bind"), "127.0.0.1")

	// Its own process group: a terminal's Ctrl-C does not reach it.
	pgid, err := syscall.Getpgid(s.Pid())
	require.NoError(t, err)
	require.Equal(t, s.Pid(), pgid)
	require.NotEqual(t, syscall.Getpgrp(), pgid)

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "Stop twice is fine")
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "a temporary data directory is removed")
}

func TestPersistentDirKeepsData(t *testing.T) {
	t.Parallel()
	need(t)
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{Dir: dir})
	require.NoError(t, err)
	require.Contains(t, command(t, s.Addr, "SET", "k", "v"), "OK")
	require.NoError(t, s.Stop())
	s, err = Start(context.Background(), Options{Dir: dir})
	require.NoError(t, err)
	defer s.Stop()
	require.Contains(t, command(t, s.Addr, "GET", "k"), "v", "the AOF brought the key back")
}

// TestOrphanIsReaped: a server left behind by a crashed owner is stopped
// before a new one uses its data directory.
func TestOrphanIsReaped(t *testing.T) {
	t.Parallel()
	need(t)
	dir := t.TempDir()
	orphan, err := Start(context.Background(), Options{Dir: dir, AOF: "off"})
	require.NoError(t, err)
	t.Cleanup(func() { orphan.Kill() })
	// Its owner "crashed": a pid that no longer runs.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(dead.Process.Pid)), 0o600))

	s, err := Start(context.Background(), Options{Dir: dir, AOF: "off"})
	require.NoError(t, err)
	defer s.Stop()
	select {
	case <-orphan.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the orphan is still running")
	}
	require.Contains(t, command(t, s.Addr, "PING"), "PONG")
}

func TestDirInUseIsRefused(t *testing.T) {
	t.Parallel()
	need(t)
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{Dir: dir, AOF: "off"})
	require.NoError(t, err)
	defer s.Stop()
	// Another live process owns it (pid 1 is always alive).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "owner.pid"), []byte("1"), 0o600))
	_, err = Start(context.Background(), Options{Dir: dir, AOF: "off"})
	require.ErrorContains(t, err, "in use")
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Options{Bin: "/nonexistent/redis-server"})
	require.ErrorIs(t, err, ErrNotInstalled)
	need(t)
	_, err = Start(context.Background(), Options{AOF: "sometimes"})
	require.ErrorContains(t, err, "AOF must be")
}

// TestPasswordLocksServer: a server started with a Password refuses every
// command of a client that has not sent it (redis-cli as an operator
// would run it), keeps the password in a 0600 file of a 0700 directory and
// off its command line, and still stops with SHUTDOWN.
func TestPasswordLocksServer(t *testing.T) {
	t.Parallel()
	need(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed")
	}
	const pw = "s3cret-0123456789abcdef"
	dir := filepath.Join(t.TempDir(), "redis")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	s, err := Start(context.Background(), Options{Dir: dir, AOF: "off", Password: pw})
	require.NoError(t, err)
	host, port, _ := net.SplitHostPort(s.Addr)
	redisCLI := func(args ...string) string {
		out, _ := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		return string(out)
	}
	require.Contains(t, redisCLI("GET", "anything"), "NOAUTH")
	require.Contains(t, redisCLI("--no-auth-warning", "-a", "wrong", "PING"), "WRONGPASS")
	require.Contains(t, redisCLI("--no-auth-warning", "-a", pw, "PING"), "PONG")

	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(dir, "auth.conf"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.Pid()))
	require.NoError(t, err)
	require.NotContains(t, string(cmdline), pw)

	start := time.Now()
	require.NoError(t, s.Stop())
	require.Less(t, time.Since(start), 5*time.Second, "stopped by SHUTDOWN, not by the fallback signals")

	_, err = Start(context.Background(), Options{Password: "a b"})
	require.Error(t, err)
}
