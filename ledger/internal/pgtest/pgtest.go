// Package pgtest gives tests a PostgreSQL schema of their own.
//
// DSN connects to the server named by HONGBAO_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), creates a
// unique schema, drops it when the test ends and returns a DSN whose
// search_path puts everything in that schema, so tests run in parallel
// without seeing each other's rows.
//
// When no server answers, it starts a private cluster with the Debian
// binaries (/usr/lib/postgresql/*/bin: initdb, pg_ctl) on a free loopback
// port in a temporary directory, as the postgres user when the tests run
// as root (initdb refuses root). Main stops it when the test binary ends.
// When that is impossible too, tests skip, except under CI=true, where
// they fail: CI must not pass by testing nothing.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultDSN is the server tried when HONGBAO_TEST_POSTGRES is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	once    sync.Once
	baseDSN string
	findErr error
	private *Cluster
)

// Main runs the tests of a package and then stops the private cluster, if
// one was started. Use it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if private != nil {
		if err := private.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// StopPrivate stops the private cluster, if one was started: for test
// binaries whose TestMain cannot use Main.
func StopPrivate() {
	if private != nil {
		if err := private.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
}

// Server returns the DSN of a reachable server, starting a private one if
// needed, or skips (fails under CI=true) the test.
func Server(t testing.TB) string {
	t.Helper()
	once.Do(func() { baseDSN, findErr = find() })
	if findErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v", findErr)
		}
		t.Skipf("pgtest: %v", findErr)
	}
	return baseDSN
}

// DSN returns a DSN of a fresh, empty schema that is dropped when the test
// ends.
func DSN(t testing.TB) string {
	t.Helper()
	base := Server(t)
	schema := "hbtest_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec1(ctx, base, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec1(ctx, base, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema: %v", err)
		}
	})
	dsn, err := WithSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// WithSearchPath adds search_path=schema to a URL or key=value DSN.
func WithSearchPath(dsn, schema string) (string, error) {
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("parse dsn: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func exec1(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func find() (string, error) {
	dsn := os.Getenv("HONGBAO_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := exec1(ctx, dsn, `SELECT 1`)
	cancel()
	if err == nil {
		return dsn, nil
	}
	c, cerr := StartCluster(context.Background())
	if cerr != nil {
		return "", fmt.Errorf("no PostgreSQL at %s (%v), and no private cluster: %w", dsn, err, cerr)
	}
	private = c
	return c.DSN, nil
}

// Cluster is a private PostgreSQL server in a temporary directory.
type Cluster struct {
	DSN    string
	dir    string
	pgCtl  string
	opts   string // the server's options, for a restart
	runAs  []string
	stopMu sync.Mutex
}

// StartCluster initialises and starts a private cluster on a free
// loopback port. Stop it with Stop.
func StartCluster(ctx context.Context) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hongbao-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no runuser: %w", err)
		}
		c.runAs = []string{runuser, "-u", "postgres", "--"}
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := c.run(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.opts = fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200", port, dir)
	if err := c.start(ctx); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	c.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	return c.run(ctx, c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o", c.opts, "start")
}

// Restart stops the server at once, as a crash would (pg_ctl stop -m
// immediate: no checkpoint, clients cut), and starts it again on the same
// port; it returns once the server takes connections (after its crash
// recovery).
func (c *Cluster) Restart(ctx context.Context) error {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.dir == "" {
		return errors.New("pgtest: the cluster is stopped")
	}
	if err := c.run(ctx, c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		return err
	}
	return c.start(ctx)
}

// Stop stops the server and removes its directory.
func (c *Cluster) Stop() error {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.dir == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := c.run(ctx, c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	err = errors.Join(err, os.RemoveAll(c.dir))
	c.dir = ""
	return err
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	argv := append(append(append([]string(nil), c.runAs...), name), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, out)
	}
	return nil
}

// binDir returns the newest /usr/lib/postgresql/<version>/bin holding
// initdb and pg_ctl.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", errors.New("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
	}
	version := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	sort.Slice(ok, func(i, j int) bool { return version(ok[i]) < version(ok[j]) })
	return ok[len(ok)-1], nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
