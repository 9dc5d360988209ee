package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/random"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// redisFlags are the flags that say which Redis a command uses, declared
// here for every command.
type redisFlags struct {
	url      string // --redis
	server   string // --redis-server, where declared
	passFile string // --redis-password-file
	ns       string // --namespace, where declared
}

// declare adds --redis, whose usage ends with without (what the command
// does when it is not given), --redis-password-file, and, when server,
// --redis-server. Every command that takes --redis takes its password
// file: a password in the URL would show in ps and in shell histories, and
// the config file refuses one.
func (r *redisFlags) declare(fs *flag.FlagSet, without string, server bool) {
	fs.StringVar(&r.url, "redis", "", "Redis URL: redis://host:port, or a Sentinel deployment, redis://S1:26379?master_set=NAME&addr=S2:26379&addr=S3:26379 (the master the sentinels name, followed through failovers); "+without)
	fs.StringVar(&r.passFile, "redis-password-file", "", "file holding the password of the Redis --redis names (with Sentinel, the master's; the sentinels are asked without one), instead of one in the URL; surrounding whitespace is trimmed")
	if server {
		fs.StringVar(&r.server, "redis-server", "redis-server", "redis-server binary to start when --redis is not given")
	}
}

// declareNamespace adds --namespace, for the commands that work on a
// deployment's campaigns.
func (r *redisFlags) declareNamespace(fs *flag.FlagSet) {
	fs.StringVar(&r.ns, "namespace", "", "the deployment's namespace in Redis, the first part of every key it writes: deployments sharing one Redis in different namespaces never see each other's campaigns; the same in every command of one deployment (docs/operations.md, Sharing a Redis); 1-64 letters, digits, _ - or .; default: hb")
}

// checkNamespace refuses a --namespace that is not valid.
func (r *redisFlags) checkNamespace() error {
	if _, err := redisstore.ParseNamespace(r.ns); err != nil {
		return usageErrorf("--namespace: %v", err)
	}
	return nil
}

// target is --redis with the password of --redis-password-file in it.
func (r *redisFlags) target() (string, error) {
	if r.passFile == "" {
		return r.url, nil
	}
	if r.url == "" {
		return "", usageErrorf("--redis-password-file needs --redis")
	}
	b, err := os.ReadFile(r.passFile)
	if err != nil {
		return "", usageErrorf("--redis-password-file: %v", err)
	}
	pass := strings.TrimSpace(string(b))
	if pass == "" {
		return "", usageErrorf("--redis-password-file %s is empty", r.passFile)
	}
	s := r.url
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	u, err := neturl.Parse(s)
	if err != nil {
		return "", usageErrorf("--redis %q: %v", redactURL(s), urlReason(err))
	}
	name := ""
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return "", usageErrorf("--redis holds a password and --redis-password-file names one: give one of them")
		}
		name = u.User.Username()
	}
	u.User = neturl.UserPassword(name, pass)
	return u.String(), nil
}

// dial connects to --redis, with the password of --redis-password-file.
func (r *redisFlags) dial(ctx context.Context) (*redisConn, error) {
	url, err := r.target()
	if err != nil {
		return nil, err
	}
	return dialRedis(ctx, url)
}

// require refuses an empty --redis, for commands that start no Redis.
func (r *redisFlags) require() error {
	if r.url == "" {
		return usageErrorf("--redis is required")
	}
	return nil
}

// needServer refuses to go on without --redis when the redis-server to
// start in its place is not installed.
func (r *redisFlags) needServer() error {
	if r.url == "" && !redisserver.Available(r.server) {
		return fmt.Errorf("no --redis given and %s is not installed (apt-get install -y redis-server)", r.server)
	}
	return nil
}

// connect connects to --redis, or without it starts --redis-server as
// opt says.
func (r *redisFlags) connect(ctx context.Context, env *IO, opt redisOptions) (*redisConn, error) {
	if r.server != "" {
		opt.Server.Bin = r.server
	}
	url, err := r.target()
	if err != nil {
		return nil, err
	}
	return connectRedis(ctx, env, url, opt)
}

// redisConn is a connected Redis and how to let go of it.
type redisConn struct {
	Client rueidis.Client
	// Addr says where Redis is, for reports.
	Addr string
	// Kind is "given", "embedded" (our redis-server child) or "emulator".
	Kind  string
	close func()
}

func (c *redisConn) Close() {
	if c != nil && c.close != nil {
		c.close()
	}
}

// redisOptions say how to get a Redis when no URL is given.
type redisOptions struct {
	// AllowEmulator lets the in-process emulator stand in when redis-server
	// is not installed (demo only: it keeps nothing on disk).
	AllowEmulator bool
	// Server configures the embedded redis-server child.
	Server redisserver.Options
}

// connectRedis connects to url, or with an empty url starts the embedded
// default: a redis-server child, else (when allowed) the emulator behind a
// loud banner.
func connectRedis(ctx context.Context, env *IO, url string, opt redisOptions) (*redisConn, error) {
	if url != "" {
		return dialRedis(ctx, url)
	}
	if redisserver.Available(opt.Server.Bin) {
		so := opt.Server
		if so.Password == "" {
			// Every redis-server we start is locked: no other local
			// process reads a campaign's seed or pool, or writes its
			// streams. serve keeps its password in a file, for operators.
			so.Password = random.Hex(24)
		}
		srv, err := redisserver.Start(ctx, so)
		if err != nil {
			return nil, err
		}
		c, err := newClient(ctx, rueidis.ClientOption{InitAddress: []string{srv.Addr}, Password: srv.Password, DisableCache: true})
		if err != nil {
			_ = srv.Stop()
			return nil, err
		}
		return &redisConn{Client: c, Addr: srv.Addr, Kind: "embedded", close: func() { c.Close(); _ = srv.Stop() }}, nil
	}
	if !opt.AllowEmulator {
		return nil, fmt.Errorf("no --redis given and redis-server is not installed (apt-get install -y redis-server)")
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start the Redis emulator: %w", err)
	}
	fmt.Fprintln(env.Stderr, strings.Repeat("!", 72))
	fmt.Fprintln(env.Stderr, "!! redis-server is not installed: running on an IN-PROCESS EMULATOR.")
	fmt.Fprintln(env.Stderr, "!! For trying hongbao out only: nothing is durable and it is slow.")
	fmt.Fprintln(env.Stderr, "!! Install redis-server (apt-get install -y redis-server) or pass --redis.")
	fmt.Fprintln(env.Stderr, strings.Repeat("!", 72))
	// The emulator does not implement client-side caching.
	c, err := newClient(ctx, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	if err != nil {
		m.Close()
		return nil, err
	}
	return &redisConn{Client: c, Addr: m.Addr(), Kind: "emulator", close: func() { c.Close(); m.Close() }}, nil
}

func dialRedis(ctx context.Context, url string) (*redisConn, error) {
	if !strings.Contains(url, "://") {
		url = "redis://" + url
	}
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, usageErrorf("--redis %q: %v", redactURL(url), urlReason(err))
	}
	opt.DisableCache = true
	c, err := newClient(ctx, opt)
	if err != nil {
		return nil, err
	}
	addr := strings.Join(opt.InitAddress, ",")
	if opt.Sentinel.MasterSet != "" {
		addr = "sentinel " + opt.Sentinel.MasterSet + "@" + addr
	}
	return &redisConn{Client: c, Addr: addr, Kind: "given", close: c.Close}, nil
}

// redactURL is a Redis URL fit for a message: its password replaced by
// xxxxx, and nothing of it when it does not parse (it may still hold one).
func redactURL(s string) string {
	u, err := neturl.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// urlReason is why a URL was refused, without the URL: net/url's errors
// quote it whole, password and all.
func urlReason(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func newClient(ctx context.Context, opt rueidis.ClientOption) (rueidis.Client, error) {
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = 3 * time.Second
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, reachError(opt, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Do(pctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, reachError(opt, err)
	}
	return c, nil
}

// reachError says why the Redis of opt could not be used: a refused
// authentication with the flag that gives the password, anything else as
// Redis said it.
func reachError(opt rueidis.ClientOption, err error) error {
	where := strings.Join(opt.InitAddress, ",")
	master := ""
	if opt.Sentinel.MasterSet != "" {
		where = "sentinel " + opt.Sentinel.MasterSet + "@" + where
		master = " (with Sentinel, the password of the master " + opt.Sentinel.MasterSet + "; the sentinels are asked without one)"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("the Redis at %s asks for a password: give the file that holds it with --redis-password-file%s: %w", where, master, err)
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"):
		return fmt.Errorf("the Redis at %s refused the password: check the file --redis-password-file names%s: %w", where, master, err)
	case strings.Contains(msg, "without any password configured"), strings.Contains(msg, "no password is set"):
		return fmt.Errorf("the Redis at %s takes no password, but one was given: drop --redis-password-file (or the password in --redis)%s: %w", where, master, err)
	}
	return fmt.Errorf("cannot reach Redis at %s: %w", where, err)
}
