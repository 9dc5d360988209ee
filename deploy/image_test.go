package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// needOrSkip skips the test, saying why, when something it needs is
// missing; under CI=true it fails instead: CI must not pass by testing
// nothing.
func needOrSkip(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing tool fails the test)", msg)
	}
	t.Skip(msg)
}

// needDocker returns the docker command when a container engine answers.
func needDocker(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker")
	if err != nil {
		needOrSkip(t, "no container engine: docker is not installed (apt-get install -y docker.io, then start dockerd)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		needOrSkip(t, "no container engine: docker is installed but its daemon does not answer (start dockerd): %v: %s", err, bytes.TrimSpace(out))
	}
	return bin
}

// runCmd runs name args and returns its output, failing t on an error.
func runCmd(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// freePort returns a loopback port free at the time of asking.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRedis starts a throwaway redis-server on the loopback.
func startRedis(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		needOrSkip(t, "redis-server is not installed (apt-get install -y redis-server)")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	return port
}

// buildImage builds the binary as the Dockerfile says (static, outside
// the image), then the image, and returns its tag.
func buildImage(t *testing.T, docker string) string {
	t.Helper()
	ctxDir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(ctxDir, "data"), 0o755))
	build := exec.Command("go", "build", "-o", filepath.Join(ctxDir, "hongbao"), "./cmd/hongbao")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	tag := fmt.Sprintf("hongbao:test-%d", time.Now().UnixNano())
	runCmd(t, "", docker, "build", "-q", "-f", "docker/Dockerfile", "-t", tag, ctxDir)
	t.Cleanup(func() { _ = exec.Command(docker, "rmi", "-f", tag).Run() })
	return tag
}

// TestImage: the image builds from scratch with the static binary, runs
// as a numeric non-root user, refuses to start without a Redis (scratch
// has no redis-server to start), and with the Redis of the host loopback
// and a config file it serves /healthz and /readyz.
func TestImage(t *testing.T) {
	docker := needDocker(t)
	redisPort := startRedis(t)
	tag := buildImage(t, docker)

	user := strings.TrimSpace(runCmd(t, "", docker, "image", "inspect", "-f", "{{.Config.User}}", tag))
	require.Equal(t, "65532:65532", user)

	// Without --redis the default is to start redis-server: not in scratch.
	out, err := exec.Command(docker, "run", "--rm", "--network", "none", tag).CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "redis-server is not installed")

	// A config file mounted read-only, as compose and Kubernetes do; the
	// container's user reads it.
	apiPort := freePort(t)
	cfgDir := t.TempDir()
	require.NoError(t, os.Chmod(cfgDir, 0o755))
	cfg := fmt.Sprintf("listen: 127.0.0.1:%d\nredis: redis://127.0.0.1:%d\nledger: sqlite:/var/lib/hongbao/ledger.db\nlog-format: json\n", apiPort, redisPort)
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "hongbao.yaml"), []byte(cfg), 0o644))
	name := fmt.Sprintf("hongbao-test-%d", time.Now().UnixNano())
	// The host's network: the container reaches the test's Redis on the
	// loopback and the test reaches the API there, no other address used.
	runCmd(t, "", docker, "run", "-d", "--name", name, "--network", "host",
		"-v", cfgDir+"/hongbao.yaml:/etc/hongbao/hongbao.yaml:ro",
		tag, "serve", "--config", "/etc/hongbao/hongbao.yaml")
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(docker, "logs", name).CombinedOutput()
			t.Logf("container logs:\n%s", logs)
		}
		_ = exec.Command(docker, "rm", "-f", name).Run()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	start := time.Now()
	require.Eventually(t, func() bool { return get(base+"/healthz") == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"/healthz never answered 200")
	t.Logf("/healthz answered 200 %v after docker run returned", time.Since(start).Round(time.Millisecond))
	require.Eventually(t, func() bool { return get(base+"/readyz") == http.StatusOK }, 10*time.Second, 50*time.Millisecond)
}

func get(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
