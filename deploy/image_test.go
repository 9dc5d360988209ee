package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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
// as a numeric non-root user, and refuses to start without a Redis
// (scratch has no redis-server to start). With the Redis of the host's
// loopback, a config file and secret files, an API container answers
// /healthz and /readyz and grants, and a scheduler container settles what
// it granted.
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

	// The deployment's shape on the host's network (the container reaches
	// the test's Redis on the loopback and the test reaches the API there,
	// no other address used): an API process and a scheduler process, one
	// config file and the secrets mounted read-only, an SQLite ledger in a
	// shared data directory, read-only root file systems.
	apiPort := freePort(t)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	data, secrets := filepath.Join(dir, "data"), filepath.Join(dir, "secrets")
	require.NoError(t, os.Mkdir(data, 0o755))
	require.NoError(t, os.Mkdir(secrets, 0o755))
	admin := writeSecret(t, secrets, "admin_key")
	writeSecret(t, secrets, "token_secret")
	cfg := fmt.Sprintf(`redis: redis://127.0.0.1:%d
ledger: sqlite:/var/lib/hongbao/ledger.db
serve:
  listen: 127.0.0.1:%d
  settle: false
  log-format: json
  admin-key-file: /run/secrets/admin_key
  token-secret-file: /run/secrets/token_secret
settle:
  consumer: scheduler
`, redisPort, apiPort)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hongbao.yaml"), []byte(cfg), 0o644))
	if os.Getuid() == 0 {
		// The image's user must be able to write the ledger; the secrets
		// stay readable by it alone.
		for _, p := range []string{data, filepath.Join(secrets, "admin_key"), filepath.Join(secrets, "token_secret")} {
			require.NoError(t, os.Chown(p, 65532, 65532))
		}
	} else {
		require.NoError(t, os.Chmod(data, 0o777))
	}
	mounts := []string{"--read-only", "--network", "host",
		"-v", dir + "/hongbao.yaml:/etc/hongbao/hongbao.yaml:ro",
		"-v", secrets + ":/run/secrets:ro", "-v", data + ":/var/lib/hongbao"}
	api := startContainer(t, docker, tag, mounts, "serve", "--config", "/etc/hongbao/hongbao.yaml")
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	start := time.Now()
	require.Eventually(t, func() bool { return get(base+"/healthz") == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"/healthz never answered 200 (container %s)", api)
	t.Logf("/healthz answered 200 %v after docker run returned", time.Since(start).Round(time.Millisecond))
	require.Eventually(t, func() bool { return get(base+"/readyz") == http.StatusOK }, 10*time.Second, 50*time.Millisecond)
	// compose's health check, from inside the container: the image has no
	// curl, its binary asks.
	hc := runCmd(t, "", docker, "exec", api, "/usr/local/bin/hongbao", "healthcheck", "--timeout", "2s", base+"/readyz")
	require.Contains(t, hc, "200 OK")

	// A grant through the API, with a token the image's own CLI mints.
	token := strings.TrimSpace(runCmd(t, "", docker, append(append([]string{"run", "--rm"}, mounts...),
		tag, "token", "--token-secret-file", "/run/secrets/token_secret", "--user", "u1")...))
	var c struct{ ID string }
	require.Equal(t, http.StatusCreated, call(t, "POST", base+"/v1/campaigns", admin, `{"total":"10.00","count":5}`, &c))
	var g struct{ Outcome string }
	require.Equal(t, http.StatusOK, call(t, "POST", base+"/v1/campaigns/"+c.ID+"/grab", token, "", &g))
	require.Equal(t, "granted", g.Outcome)

	// serve --settle=false settles nothing: the grant waits for the
	// scheduler, which the settle container is.
	var st struct {
		Settlement struct {
			Lag     int `json:"lag_entries"`
			Pending int `json:"pending_entries"`
		}
	}
	require.Equal(t, http.StatusOK, call(t, "GET", base+"/v1/campaigns/"+c.ID, admin, "", &st))
	require.Equal(t, 1, st.Settlement.Lag+st.Settlement.Pending, "the API alone settled the grant")
	startContainer(t, docker, tag, mounts, "settle", "--config", "/etc/hongbao/hongbao.yaml")
	require.Eventually(t, func() bool {
		return call(t, "GET", base+"/v1/campaigns/"+c.ID, admin, "", &st) == http.StatusOK &&
			st.Settlement.Lag+st.Settlement.Pending == 0
	}, 30*time.Second, 100*time.Millisecond, "the scheduler container did not settle the grant")

	// docker stop: serve, PID 1 of its container, takes SIGTERM as a
	// rollout's: /readyz 503 for --shutdown-delay (5s) while it serves,
	// then the drain, and exits 0 well within compose's grace period.
	start = time.Now()
	runCmd(t, "", docker, "stop", "--time", "45", api)
	took := time.Since(start)
	require.Equal(t, "0", strings.TrimSpace(runCmd(t, "", docker, "inspect", "-f", "{{.State.ExitCode}}", api)))
	logs := runCmd(t, "", docker, "logs", api)
	require.Contains(t, logs, "shutting down: /readyz answers 503")
	require.GreaterOrEqual(t, took, 5*time.Second, "the shutdown delay")
	require.Less(t, took, 45*time.Second, "stopped before docker's SIGKILL")
}

// writeSecret writes a random secret file (mode 0400) and returns it.
func writeSecret(t *testing.T, dir, name string) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	secret := hex.EncodeToString(b)
	mode := os.FileMode(0o400)
	if os.Getuid() != 0 {
		mode = 0o444 // the container's user is not this one
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(secret+"\n"), mode))
	return secret
}

// startContainer starts the image in the background with the docker run
// options opts and the arguments args; it is removed when the test ends,
// its log shown if the test failed.
func startContainer(t *testing.T, docker, tag string, opts []string, args ...string) string {
	t.Helper()
	name := fmt.Sprintf("hongbao-test-%s-%d", args[0], time.Now().UnixNano())
	runCmd(t, "", docker, append(append(append([]string{"run", "-d", "--name", name}, opts...), tag), args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(docker, "logs", name).CombinedOutput()
			t.Logf("%s log:\n%s", name, logs)
		}
		_ = exec.Command(docker, "rm", "-f", name).Run()
	})
	return name
}

// call sends a request with a bearer credential and decodes the JSON
// answer into out; it returns the status.
func call(t *testing.T, method, url, bearer, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+bearer)
	if method == "POST" {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", time.Now().UnixNano()))
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	} else {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
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
