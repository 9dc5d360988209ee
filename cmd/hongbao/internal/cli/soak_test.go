package cli

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// soakUsers is the soak's number of users: HONGBAO_SOAK_USERS, else
// 20,000 (1,000,000 with HONGBAO_LONG_FAULTS=1).
func soakUsers(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("HONGBAO_SOAK_USERS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "HONGBAO_SOAK_USERS")
		return n
	}
	if longFaults() {
		return 1_000_000
	}
	return 20_000
}

// TestSoak: users x 2 clicks at once through serve running as a process
// of its own (the binary, on the fixture's Redis and SQLite ledger), for
// half as many packets. No answer but 200, and 429 and 503 by design;
// nobody told of two packets; every packet granted; serve's memory
// sampled throughout (VmRSS) and its peak (VmHWM) reported and bounded;
// the campaign settles and reconciles.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	users := soakUsers(t)
	packets := users / 2
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--admin-key-file", fx.adminFile,
		"--token-secret-file", fx.secretFile, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	url := startProcess(t, cmd)
	api := fx.api(t, url)
	id := api.create(t, url, fmt.Sprintf(`{"total":"%d.00","count":%d}`, packets, packets))

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if kb := procStatusKB(cmd.Process.Pid, "VmRSS"); kb > peak.Load() {
				peak.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	r := newRainer(t, api, func() string { return url }, id)
	r.rain("s", 0, users, 64, 2, 0, nil)
	took := time.Since(start)
	close(stop)
	<-sampled
	hwm := procStatusKB(cmd.Process.Pid, "VmHWM")
	st := r.statusCounts()
	t.Logf("%d users x 2 clicks in %v (%.0f requests/s): answers by status %v, %d retries; serve RSS: peak sampled %.1f MiB, VmHWM %.1f MiB",
		users, took.Round(time.Millisecond), float64(2*users)/took.Seconds(), st, r.retries.Load(), float64(peak.Load())/1024, float64(hwm)/1024)
	require.EqualValues(t, packets, len(r.acked), "every packet granted, each to one user")
	require.Less(t, hwm, int64(1536*1024), "serve's memory stays bounded")

	code, _, err := api.call("POST", url+"/v1/campaigns/"+id+"/close", api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	waitSettled(t, api, func() string { return url }, id, 10*time.Minute)
	code, out, errs := run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "%s %s", out, errs)
}

// buildBinary builds hongbao into a directory of the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hongbao")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hongbao/hongbao/cmd/hongbao").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// startProcess starts a serve command and returns the URL it listens on;
// the process gets SIGTERM when the test ends and must exit cleanly.
func startProcess(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			require.NoError(t, err, "serve's exit: %s", stderr.String())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("serve did not stop: %s", stderr.String())
		}
	})
	select {
	case url := <-urlc:
		return url
	case err := <-exited:
		t.Fatalf("serve exited: %v %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen: %s", stderr.String())
	}
	return ""
}

// procStatusKB reads a "kB" field of /proc/<pid>/status (0 when it
// cannot).
func procStatusKB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
