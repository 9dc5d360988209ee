package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// no such flag and ignores it.
	cfg = writeConfig(t, "settle: false\n")
	s = &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg}))
	require.False(t, s.f.settle)
	c = &settleCmd{base: base{env: testIO(nil)}}
	require.NoError(t, c.parseFlags([]string{"--config", cfg, "--redis", "127.0.0.1:1"}))
}

// TestConfigKeyOfAnotherCommand: a key at the top that the command
// reading the file lacks, but another command has, is ignored by it (and
// still checked); the commands that have it take it.
func TestConfigKeyOfAnotherCommand(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis: 127.0.0.1:1
ledger: sqlite:x.db
data-dir: /var/lib/hongbao
listen: 127.0.0.1:9400
api: http://api-1:8080
user: alice
campaigns: c1,c2
`)
	c := &settleCmd{base: base{env: testIO(nil)}}
	require.NoError(t, c.parseFlags([]string{"--config", cfg}), "settle has no data-dir, listen, api or user")
	require.Equal(t, []string{"c1", "c2"}, c.campaigns, "a key settle has is taken")
	r := &reconcileCmd{base: base{env: testIO(nil)}}
	require.NoError(t, r.parseFlags([]string{"--config", cfg, "--campaign", "c1"}))
	require.Equal(t, "sqlite:x.db", r.dsn)
	tk := &tokenCmd{base: base{env: testIO(nil)}}
	require.NoError(t, tk.parseFlags([]string{"--config", cfg}))
	require.Equal(t, "alice", tk.user)
	require.Equal(t, fileList{"/var/lib/hongbao/token.secret"}, tk.secrets, "data-dir names token's default secret")
	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", cfg}))
	require.Equal(t, "127.0.0.1:9400", s.f.listen)
	require.Equal(t, "/var/lib/hongbao", s.f.dataDir)

	// Checked all the same: a value of the wrong shape for the command
	// that has the key is refused by every command reading the file.
	cfg = writeConfig(t, "redis: 127.0.0.1:1\nlisten: [a, b]\n")
	err := (&settleCmd{base: base{env: testIO(nil)}}).parseFlags([]string{"--config", cfg})
	require.ErrorContains(t, err, "line 2: listen: takes one value, not a list")
}

// TestConfigEveryFlag: every command reads --config, and every flag of
// every command (each of bench's modes) can be set in the file under its
// own name, and takes the value written there.
func TestConfigEveryFlag(t *testing.T) {
	t.Parallel()
	all := collectCommandFlags()
	for _, c := range commands {
		if c.name == "version" {
			require.NotContains(t, all, c.name, "version reads no file: it answers whatever else is wrong")
			continue
		}
		require.Contains(t, all, c.name, "hongbao %s reads no --config", c.name)
		for _, fs := range all[c.name] {
			var doc strings.Builder
			want := map[string]string{}
			fs.VisitAll(func(f *flag.Flag) {
				if f.Name == configFlag || f.Name == versionFlag {
					return
				}
				yamlText, str := sampleValue(t, f)
				doc.WriteString(f.Name + ": " + yamlText + "\n")
				want[f.Name] = str
			})
			require.NoError(t, applyConfig(fs, []byte(doc.String()), nil), "%s:\n%s", fs.Name(), doc.String())
			fs.VisitAll(func(f *flag.Flag) {
				if want[f.Name] != "" {
					require.Equal(t, want[f.Name], f.Value.String(), "%s --%s", fs.Name(), f.Name)
				}
			})
			require.NotEmpty(t, want, fs.Name())
		}
	}
	require.Greater(t, countFlags(all["serve"][0]), 30)
}

// countFlags counts the flags of fs.
func countFlags(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
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
	case int, int64, uint64:
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
		{"settle", "lisen: 127.0.0.1:8080\n", `line 1: unknown key "lisen": no hongbao command has a flag of that name`},
		{"settle", "settle:\n  drain: true\n  listen: 127.0.0.1:8080\n", `line 3: unknown key "listen" under settle: not a flag of hongbao settle`},
		{"serve", "settle:\n  listen: 127.0.0.1:8080\n", `line 2: unknown key "listen" under settle:`},
		{"serve", "reconcile:\n  campaign: c1\n  balance: true\n", `line 3: unknown key "balance" under reconcile:`},
		{"settle", "serve:\n  admin-key: " + secret + "\n", `"admin-key" would hold a secret`},
		{"serve", "webhook: https://hongbao:" + secret + "@wallet.example/hook\n", "webhook: the URL holds a password"},
		{"serve", "version: true\n", `"version" cannot be set`},
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

// sampleConfig is deploy/hongbao.yaml with its secret files in a
// temporary directory, each holding a secret: the file as a deployment
// mounts it.
func sampleConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "hongbao.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	for _, m := range regexp.MustCompile(`/run/secrets/(\w+)`).FindAllStringSubmatch(string(b), -1) {
		writeSecret(t, dir, m[1])
	}
	return writeConfig(t, strings.ReplaceAll(string(b), "/run/secrets/", dir+"/"))
}

// sampleArgs are the operands and flags a command needs besides the
// config file to get through parseFlags (race's mode comes first).
var sampleArgs = map[string][]string{
	"owner":       {"c1"},
	"healthcheck": {"http://127.0.0.1:8080/readyz"},
	"campaign":    {"status", "c1"},
	"race":        {"once"},
	"reconcile":   {"--campaign", "c1"},
	"rebuild":     {"--campaign", "c1"},
	"token":       {"--user", "alice"},
	"verify":      {"receipt", "--jwks", "jwks.json"},
}

// TestSampleConfigEveryCommand: the sample config file, the one file of
// the split deployment, is read by every command without error (a key
// only another command has is ignored), and gives each what the
// deployment needs: the API without settlement, the metrics listeners,
// the namespace, Redis and its password file, the ledger, the secrets.
func TestSampleConfigEveryCommand(t *testing.T) {
	t.Parallel()
	path := sampleConfig(t)
	otherPass := writeSecret(t, t.TempDir(), "other_password")
	for _, c := range commands {
		if c.name == "version" {
			continue
		}
		cmd := c.new(testIO(nil))
		err := cmd.parseFlags(append(slices.Clone(sampleArgs[c.name]), "--config", path))
		require.NoError(t, err, "hongbao %s --config deploy/hongbao.yaml", c.name)
		cmd.close()

		// The environment names the file as well, and overrides it.
		env := testIO(map[string]string{"HONGBAO_CONFIG": path, "HONGBAO_REDIS_PASSWORD_FILE": otherPass})
		var sets []*flag.FlagSet
		env.declared = func(fs *flag.FlagSet) { sets = append(sets, fs) }
		cmd = c.new(env)
		require.NoError(t, cmd.parseFlags(sampleArgs[c.name]), "HONGBAO_CONFIG=deploy/hongbao.yaml hongbao %s", c.name)
		cmd.close()
		require.NotEmpty(t, sets, c.name)
		fs := sets[len(sets)-1]
		require.Equal(t, path, fs.Lookup(configFlag).Value.String(), c.name)
		if f := fs.Lookup("redis-password-file"); f != nil {
			require.Equal(t, otherPass, f.Value.String(), "hongbao %s: the environment over the file", c.name)
			require.Contains(t, fs.Lookup("redis").Value.String(), "master_set=", "hongbao %s: the file", c.name)
		}
	}

	s := &serveCmd{base: base{env: testIO(nil)}}
	require.NoError(t, s.parseFlags([]string{"--config", path}))
	require.False(t, s.f.settle, "the API processes leave settlement to settle")
	require.Equal(t, "hb", s.f.redis.ns)
	require.Contains(t, s.f.redis.url, "master_set=", "through the sentinels")
	require.NotEmpty(t, s.f.redis.passFile)
	require.Contains(t, s.f.ledger, "passfile=")
	require.Equal(t, 1, s.f.waitReplicas)
	require.NotEmpty(t, s.f.metricsListen)
	require.Len(t, s.f.adminKeys, 1)
	require.Len(t, s.f.tokenSecrets, 1)
	require.Len(t, s.f.paymentKeys, 1)
	c := &settleCmd{base: base{env: testIO(nil)}}
	require.NoError(t, c.parseFlags([]string{"--config", path}))
	require.Equal(t, s.f.redis.url, c.redis.url)
	require.Equal(t, s.f.redis.passFile, c.redis.passFile)
	require.Equal(t, s.f.redis.ns, c.redis.ns)
	require.Equal(t, s.f.ledger, c.dsn)
	require.Equal(t, 1, c.waitN)
	require.Equal(t, "scheduler", c.consumer)
	require.NotEmpty(t, c.metricsListen, "the scheduler exports its metrics too")
	require.Equal(t, "json", c.logFormat)
	tk := &tokenCmd{base: base{env: testIO(nil)}}
	require.NoError(t, tk.parseFlags([]string{"--config", path, "--user", "alice"}))
	require.Equal(t, s.f.tokenSecrets, tk.secrets, "token signs with the secret serve verifies with")
	require.Equal(t, s.f.tokenMaxAge, tk.maxAge)
	cm := &campaignCmd{base: base{env: testIO(nil)}}
	require.NoError(t, cm.parseFlags([]string{"--config", path, "status", "c1"}))
	require.Equal(t, fileList(s.f.adminKeys), cm.keyFiles, "campaign calls with the key serve takes")
	require.Equal(t, "http://api-1:8080", cm.apiURL)
	// The commands an operator runs reach the same stores.
	want := map[string]string{"redis": s.f.redis.url, "redis-password-file": s.f.redis.passFile, "namespace": "hb", "ledger": s.f.ledger}
	for _, name := range []string{"reconcile", "rebuild", "owner", "migrate"} {
		fs := collectCommandFlags()[name][0]
		require.NoError(t, parseFlags(fs, testIO(nil), []string{"--config", path}), name)
		for f, v := range want {
			if fs.Lookup(f) != nil {
				require.Equal(t, v, fs.Lookup(f).Value.String(), "%s --%s", name, f)
			}
		}
	}
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

// TestOneConfigLockedRedis: one config file, as the split deployment has
// it, names a Redis that requires a password and the file that holds it;
// migrate, serve --settle=false, token, campaign, settle, reconcile,
// owner and rebuild all reach that Redis and the ledger through the file
// alone. Without the password file each says which flag gives it.
func TestOneConfigLockedRedis(t *testing.T) {
	t.Parallel()
	const pass = "Locked-Redis-Password-Of-The-Test-42"
	srv, err := redisserver.Start(context.Background(), redisserver.Options{AOF: "off", Password: pass})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	dir := t.TempDir()
	passFile := filepath.Join(dir, "redis.pass")
	require.NoError(t, os.WriteFile(passFile, []byte(pass+"\n"), 0o600))
	admin, secret := writeSecret(t, dir, "admin_key"), writeSecret(t, dir, "token_secret")
	common := fmt.Sprintf("namespace: locked\nredis: %s\nledger: sqlite:%s\ndata-dir: %s\nadmin-key-file: %s\ntoken-secret-file: %s\ntoken-max-age: 1h\n",
		srv.Addr, filepath.Join(dir, "ledger.db"), filepath.Join(dir, "data"), admin, secret)
	sections := "serve:\n  listen: 127.0.0.1:0\n  settle: false\nsettle:\n  consumer: scheduler\n"
	cfg := writeConfig(t, common+"redis-password-file: "+passFile+"\n"+sections)
	ok := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, nil, append(args, "--config", cfg)...)
		require.Equal(t, 0, code, "%v: %s", args, errs)
		require.NotContains(t, out+errs, pass)
		return out
	}

	require.Contains(t, ok("migrate"), "identity ledger-")
	p := startServe(t, "--config", cfg)
	api := newAPIClient(t, p.URL, admin, secret)
	id := api.create(t, p.URL, `{"total":"1.00","count":2}`)
	tok := strings.TrimSpace(ok("token", "--user", "alice"))
	code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", tok, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "granted", m["outcome"], "serve takes the token minted from the same file")
	code, _, errs := run(t, nil, "token", "--config", cfg, "--user", "alice", "--ttl", "2h")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--ttl 2h0m0s exceeds --token-max-age 1h0m0s")
	code, body, err := api.raw("GET", p.URL+"/metrics", api.admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `\nhongbao_build_info\{goversion="go[^"]+",revision="[^"]*",version="[^"]+"\} 1\n`, body)

	require.Contains(t, ok("campaign", "--api", p.URL, "status", id), id)
	require.Contains(t, ok("settle", "--drain"), "settled 1 grants")
	require.Contains(t, ok("reconcile", "--campaign", id), "OK")
	require.Contains(t, ok("owner", id), id+" is owned by ledger-")
	code, _, errs = run(t, nil, "rebuild", "--config", cfg, "--campaign", id)
	require.Equal(t, 1, code, "rebuild reached Redis and the ledger: %s", errs)
	require.Contains(t, errs, "look healthy")

	// Without the password file: every command names the flag that gives
	// the password, never the raw NOAUTH alone.
	noPass := writeConfig(t, common+sections)
	for _, args := range [][]string{{"settle", "--drain"}, {"reconcile", "--campaign", id}, {"owner", id}, {"rebuild", "--campaign", id}, {"serve"}} {
		code, _, errs := run(t, nil, append(args, "--config", noPass)...)
		require.Equal(t, 1, code, "%v: %s", args, errs)
		require.Contains(t, errs, "asks for a password: give the file that holds it with --redis-password-file", args)
		require.Contains(t, errs, "NOAUTH", args)
	}
	wrong := writeSecret(t, dir, "wrong.pass")
	code, _, errs = run(t, nil, "owner", id, "--config", noPass, "--redis-password-file", wrong)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "refused the password: check the file --redis-password-file names")
}

// TestConfigCampaignAdminKey: campaign calls with the first admin key the
// config file names for serve; HONGBAO_ADMIN_KEY, the key itself, beats
// the file as every variable does, and --admin-key-file beats both.
func TestConfigCampaignAdminKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := writeSecret(t, dir, "admin-1"), writeSecret(t, dir, "admin-2")
	cfg := writeConfig(t, "admin-key-file: ["+first+", "+second+"]\n")
	c := &campaignCmd{base: base{env: testIO(nil)}}
	require.NoError(t, c.parseFlags([]string{"--config", cfg, "status", "c1"}))
	require.Equal(t, fileList{first, second}, c.keyFiles)
	short := map[string]string{"HONGBAO_ADMIN_KEY": "sekrit-short"}
	c = &campaignCmd{base: base{env: testIO(short)}}
	require.ErrorContains(t, c.parseFlags([]string{"--config", cfg, "status", "c1"}), "HONGBAO_ADMIN_KEY: the key is 12 bytes",
		"the variable's key, not the file's")
	c = &campaignCmd{base: base{env: testIO(short)}}
	require.NoError(t, c.parseFlags([]string{"--config", cfg, "--admin-key-file", second, "status", "c1"}))
}
