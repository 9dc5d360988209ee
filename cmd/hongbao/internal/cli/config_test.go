package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hongbao.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func testIO(env map[string]string) *IO {
	return &IO{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return env[k] }}
}

// TestConfigPrecedence: the file sets what nothing else sets, the
// environment overrides the file, the command line overrides both, and a
// repeatable flag takes a list.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `# a deployment's serve
listen: 127.0.0.1:9100
user-rate: 2.5
user-burst: 4
log-format: json
settle: false
lease-ttl: 3s
admin-key-file: [/run/secrets/admin-1, /run/secrets/admin-2]
token-secret-file: /run/secrets/token
`)
	s := &serveCmd{base: base{env: testIO(map[string]string{"HONGBAO_USER_RATE": "7", "HONGBAO_LOG_FORMAT": "text"})}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg, "--listen", "127.0.0.1:9200", "--user-burst", "9"}))
	require.Equal(t, "127.0.0.1:9200", s.f.listen, "the flag beats the file")
	require.Equal(t, 9, s.f.userBurst, "the flag beats the file")
	require.Equal(t, 7.0, s.f.userRate, "the environment beats the file")
	require.Equal(t, "text", s.f.logFormat, "the environment beats the file")
	require.False(t, s.f.settle, "from the file")
	require.Equal(t, 3*time.Second, s.f.leaseTTL, "from the file")
	require.Equal(t, fileList{"/run/secrets/admin-1", "/run/secrets/admin-2"}, s.f.adminKeys)
	require.Equal(t, fileList{"/run/secrets/token"}, s.f.tokenSecrets)

	// A repeatable flag on the command line replaces the file's list,
	// rather than adding to it.
	s = &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg, "--admin-key-file", "/k"}))
	require.Equal(t, fileList{"/k"}, s.f.adminKeys)

	// HONGBAO_CONFIG names the file too; settle reads the same way.
	scfg := writeConfig(t, "redis: redis://127.0.0.1:6379\nledger: sqlite:/var/lib/hongbao/ledger.db\nlease-ttl: 2s\nretention: 48h\n")
	c := &settleCmd{base: base{env: testIO(map[string]string{"HONGBAO_CONFIG": scfg, "HONGBAO_LEASE_TTL": "4s"})}}
	require.NoError(t, c.parseFlags([]string{"--retention", "24h"}))
	require.Equal(t, "redis://127.0.0.1:6379", c.redis.url)
	require.Equal(t, "sqlite:/var/lib/hongbao/ledger.db", c.dsn)
	require.Equal(t, 4*time.Second, c.leaseTTL)
	require.Equal(t, 24*time.Hour, c.retention)
}

// TestConfigSections: one file for serve and settle: the keys at the top
// go to both, a section to its command alone, and serve's --settle is
// still a key (a value, not a section).
func TestConfigSections(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis: redis://127.0.0.1:6379
ledger: postgres://hongbao@127.0.0.1:5432/hongbao?passfile=/run/secrets/pgpass
lease-ttl: 5s
serve:
  listen: 127.0.0.1:9300
  settle: false
  admin-key-file: /run/secrets/admin
settle:
  consumer: scheduler-1
  retention: 72h
`)
	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg}))
	require.Equal(t, "redis://127.0.0.1:6379", s.f.redis.url)
	require.Equal(t, 5*time.Second, s.f.leaseTTL)
	require.Equal(t, "127.0.0.1:9300", s.f.listen)
	require.False(t, s.f.settle)
	require.Equal(t, fileList{"/run/secrets/admin"}, s.f.adminKeys)

	c := &settleCmd{base: base{env: testIO(map[string]string{"HONGBAO_CONSUMER": "from-env"})}}
	require.NoError(t, c.parseFlags([]string{"--config", cfg}))
	require.Equal(t, "redis://127.0.0.1:6379", c.redis.url)
	require.Contains(t, c.dsn, "passfile=")
	require.Equal(t, 5*time.Second, c.leaseTTL)
	require.Equal(t, "from-env", c.consumer, "the environment beats the section")
	require.Equal(t, 72*time.Hour, c.retention)

	// serve's settle flag at the top is a flag, not a section; settle has
	// no such flag, so the same file is refused there.
	cfg = writeConfig(t, "settle: false\n")
	s = &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg}))
	require.False(t, s.f.settle)
	c = &settleCmd{base: base{env: testIO(nil)}}
	err := c.parseFlags([]string{"--config", cfg, "--redis", "127.0.0.1:1"})
	require.ErrorContains(t, err, `unknown key "settle"`)
}

// TestConfigEveryFlag: every flag of serve and settle can be set in the
// file under its own name, and takes the value written there.
func TestConfigEveryFlag(t *testing.T) {
	t.Parallel()
	s := &serveCmd{base: base{env: testIO(nil)}}
	c := &settleCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags(nil))
	require.Error(t, c.parseFlags(nil)) // no --redis; the flags are declared all the same
	for name, fs := range map[string]*flag.FlagSet{"serve": s.flags, "settle": c.flags} {
		var doc strings.Builder
		want := map[string]string{}
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "config" {
				return
			}
			yamlText, str := sampleValue(t, f)
			doc.WriteString(f.Name + ": " + yamlText + "\n")
			want[f.Name] = str
		})
		require.NoError(t, applyConfig(fs, []byte(doc.String()), nil), "%s:\n%s", name, doc.String())
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "config" {
				require.Equal(t, want[f.Name], f.Value.String(), "%s --%s", name, f.Name)
			}
		})
		require.Greater(t, len(want), 10, name)
	}
}

// sampleValue is a value of f's kind other than its default: the YAML to
// write and what f.Value.String() must then say.
func sampleValue(t *testing.T, f *flag.Flag) (yamlText, str string) {
	t.Helper()
	if isList(f) {
		return "[/run/secrets/a, /run/secrets/b]", "/run/secrets/a,/run/secrets/b"
	}
	g, ok := f.Value.(flag.Getter)
	require.True(t, ok, f.Name)
	switch v := g.Get().(type) {
	case bool:
		if v {
			return "false", "false"
		}
		return "true", "true"
	case time.Duration:
		return "1500ms", "1.5s"
	case int, int64:
		return "7", "7"
	case float64:
		return "2.5", "2.5"
	case string:
		return "sample-" + f.Name, "sample-" + f.Name
	}
	t.Fatalf("--%s: no sample for %T", f.Name, g.Get())
	return "", ""
}

// TestConfigErrors: what a config file may not say is refused with exit
// status 2, naming the key and its line, never quoting a value (it may be
// a secret).
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-s3cr3t-s3cr3t"
	for _, tc := range []struct {
		cmd, text, want string
	}{
		{"serve", "listen: 127.0.0.1:1\nlisen: 127.0.0.1:2\n", `line 2: unknown key "lisen"`},
		{"serve", "admin-key: " + secret + "\n", `"admin-key" would hold a secret`},
		{"serve", "token-secret: " + secret + "\n", `"token-secret" would hold a secret`},
		{"settle", "webhook-secret: " + secret + "\n", `"webhook-secret" would hold a secret`},
		{"settle", "redis: redis://:" + secret + "@127.0.0.1:6379\n", "line 1: redis: the URL holds a password"},
		{"settle", "redis: \":" + secret + "@127.0.0.1:6379\"\n", "line 1: redis: the URL holds a password"},
		{"settle", "webhook: https://hongbao:" + secret + "@wallet.example/hook\n", "webhook: the URL holds a password"},
		{"serve", "ledger: postgres://hongbao:" + secret + "@db/hongbao\n", "ledger: the URL holds a password"},
		{"settle", "ledger: host=db user=hongbao password=" + secret + "\n", "ledger: the DSN holds a password"},
		{"settle", "listen: 127.0.0.1:8080\n", `unknown key "listen" (not a flag of hongbao settle;`},
		{"settle", "settle:\n  drain: true\n  listen: 127.0.0.1:8080\n", `line 3: unknown key "listen"`},
		{"serve", "serve:\n  lisen: 127.0.0.1:8080\n", `line 2: unknown key "lisen"`},
		{"serve", "user-rate: 2\nserve:\n  user-rate: 3\n", `line 3: "user-rate" is given twice`},
		{"serve", "serve:\n  admin-key: " + secret + "\n", `"admin-key" would hold a secret`},
		{"serve", "config: other.yaml\n", `"config" cannot be set`},
		{"serve", "listen: [a, b]\n", "listen: takes one value, not a list"},
		{"serve", "listen:\n", "listen: needs a value"},
		{"serve", "user-rate: fast\n", "not a valid value for --user-rate"},
		{"serve", "settle: maybe\n", "not a valid value for --settle"},
		{"serve", "admin-key-file: [[a]]\n", "a list of single values"},
		{"serve", "- listen\n", "must be a mapping"},
		{"serve", "listen: a\nlisten: b\n", "listen"},
	} {
		cfg := writeConfig(t, tc.text)
		args := []string{tc.cmd, "--config", cfg}
		if tc.cmd == "settle" {
			args = append(args, "--redis", "127.0.0.1:1", "--ledger", "sqlite:x.db")
		}
		code, _, errs := run(t, nil, args...)
		require.Equal(t, 2, code, "%q: %s", tc.text, errs)
		require.Contains(t, errs, tc.want, tc.text)
		require.Contains(t, errs, cfg, "the message names the file")
		require.NotContains(t, errs, secret, "a value is never quoted")
	}
	code, _, errs := run(t, nil, "serve", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--config")

	// A key the command line or the environment overrides is still checked.
	cfg := writeConfig(t, "redis: redis://:"+secret+"@127.0.0.1:6379\n")
	code, _, errs = run(t, map[string]string{"HONGBAO_REDIS": "127.0.0.1:1"}, "settle", "--config", cfg, "--ledger", "sqlite:x.db")
	require.Equal(t, 2, code, errs)
	require.Contains(t, errs, "the URL holds a password")
}

// TestSampleConfig: the sample config file the compose deployment mounts
// is accepted by serve and settle, and says what the deployment needs:
// the API without settlement, both processes' metrics listeners.
func TestSampleConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "..", "..", "deploy", "hongbao.yaml")
	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", path}))
	require.False(t, s.f.settle, "the API processes leave settlement to settle")
	require.Contains(t, s.f.redis.url, "master_set=", "through the sentinels")
	require.Contains(t, s.f.ledger, "passfile=")
	require.Equal(t, 1, s.f.waitReplicas)
	require.NotEmpty(t, s.f.metricsListen)
	require.NotEmpty(t, s.f.adminKeys)
	require.NotEmpty(t, s.f.tokenSecrets)
	c := &settleCmd{base: base{env: testIO(nil)}}
	require.NoError(t, c.parseFlags([]string{"--config", path}))
	require.Equal(t, s.f.redis.url, c.redis.url)
	require.Equal(t, s.f.ledger, c.dsn)
	require.Equal(t, 1, c.waitN)
	require.Equal(t, "scheduler", c.consumer)
	require.NotEmpty(t, c.metricsListen, "the scheduler exports its metrics too")
	require.Equal(t, "json", c.logFormat)
}

// TestRedisPasswordFile: serve's and settle's --redis-password-file (and
// its config key) unlock a Redis that requires a password, which stays out
// of the URL; without it the Redis refuses them; a password in both places,
// an empty file, or the file without --redis is a usage error.
func TestRedisPasswordFile(t *testing.T) {
	t.Parallel()
	const pass = "Redis-Password-For-The-Test-1234"
	srv, err := redisserver.Start(context.Background(), redisserver.Options{AOF: "off", Password: pass})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	dir := t.TempDir()
	passFile := filepath.Join(dir, "redis.pass")
	require.NoError(t, os.WriteFile(passFile, []byte(pass+"\n"), 0o600))
	ledger := "sqlite:" + filepath.Join(dir, "ledger.db")

	code, _, errs := run(t, nil, "settle", "--redis", srv.Addr, "--redis-password-file", passFile, "--ledger", ledger, "--drain")
	require.Equal(t, 0, code, errs)
	cfg := writeConfig(t, "redis: "+srv.Addr+"\nredis-password-file: "+passFile+"\nledger: "+ledger+"\n")
	code, _, errs = run(t, nil, "settle", "--config", cfg, "--drain")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, errs, pass)

	code, _, errs = run(t, nil, "settle", "--redis", srv.Addr, "--ledger", ledger, "--drain")
	require.Equal(t, 1, code, "a locked Redis without the password: %s", errs)
	require.Contains(t, errs, "NOAUTH")

	// serve reaches it too: /readyz says so.
	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--redis", srv.Addr, "--redis-password-file", passFile,
		"--ledger", ledger, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}))
	conn, err := s.f.redis.connect(context.Background(), s.env, redisOptions{})
	require.NoError(t, err)
	conn.Close()

	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"settle", "--redis", "redis://:" + pass + "@" + srv.Addr, "--redis-password-file", passFile, "--ledger", ledger, "--drain"}, "give one of them"},
		{[]string{"settle", "--redis", srv.Addr, "--redis-password-file", empty, "--ledger", ledger, "--drain"}, "is empty"},
		{[]string{"settle", "--redis", srv.Addr, "--redis-password-file", filepath.Join(dir, "missing"), "--ledger", ledger, "--drain"}, "--redis-password-file"},
		{[]string{"serve", "--redis-password-file", passFile, "--data-dir", filepath.Join(dir, "data2"), "--listen", "127.0.0.1:0"}, "needs --redis"},
	} {
		code, _, errs := run(t, nil, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.want)
		require.NotContains(t, errs, pass)
	}
	// The config file names the file, never the password.
	cfg = writeConfig(t, "redis-password: "+pass+"\n")
	code, _, errs = run(t, nil, "settle", "--config", cfg, "--redis", srv.Addr)
	require.Equal(t, 2, code)
	require.Contains(t, errs, `"redis-password" would hold a secret`)
	require.NotContains(t, errs, pass)
}
