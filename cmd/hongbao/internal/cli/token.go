package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
)

// tokenCmd is "hongbao token": a user token minted from serve's secret,
// with serve's scope. Its flags that say what serve accepts have serve's
// names, so that one config file gives both the same secret, issuer,
// audience and maximum age.
type tokenCmd struct {
	base
	user    string
	ttl     time.Duration
	maxAge  time.Duration
	secrets fileList
	dataDir string
	scope   httpapi.TokenScope
}

func newTokenCmd(env *IO) command { return &tokenCmd{base: base{env: env}} }

const tokenUsage = `Usage: hongbao token --user ID [--ttl 1h] [flags]

Mints a user token (an HS256 JWT) that serve accepts: signed with the first
--token-secret-file, carrying --token-issuer and --token-audience, and
refused here when --ttl exceeds --token-max-age (serve would refuse it).
Read them from serve's config file (--config) to mint what serve takes.
For tests and demos: a platform signs its users' tokens itself.

Every flag can also be set with HONGBAO_<NAME>, e.g. HONGBAO_USER=alice.

Flags:`

func (c *tokenCmd) parseFlags(args []string) error {
	if _, err := c.parseCommand("token", tokenUsage, args, func(fs *flag.FlagSet) {
		fs.StringVar(&c.user, "user", "", "user id, the token's sub (required)")
		fs.DurationVar(&c.ttl, "ttl", time.Hour, "lifetime of the token, at most --token-max-age")
		fs.Var(&c.secrets, "token-secret-file", "file holding the secret, as [kid=]PATH; repeatable as serve's, the first signs; default: <data-dir>/token.secret")
		fs.StringVar(&c.scope.Issuer, "token-issuer", "", "the token's iss, as serve's --token-issuer checks it; default: none")
		fs.StringVar(&c.scope.Audience, "token-audience", "", "the token's aud, as serve's --token-audience checks it; default: none")
		fs.DurationVar(&c.maxAge, "token-max-age", 24*time.Hour, "serve's --token-max-age: a --ttl beyond it is refused, as serve would refuse the token")
		fs.StringVar(&c.dataDir, "data-dir", defaultDataDir, "serve's data directory, for the default secret")
	}); err != nil {
		return err
	}
	if err := hongbao.ValidateUserID(c.user); err != nil {
		return usageErrorf("--user: %v", err)
	}
	if c.ttl <= 0 || c.maxAge <= 0 {
		return usageErrorf("--ttl and --token-max-age must be positive")
	}
	if c.ttl > c.maxAge {
		return usageErrorf("--ttl %s exceeds --token-max-age %s: serve would refuse the token", c.ttl, c.maxAge)
	}
	if len(c.secrets) == 0 {
		c.secrets = fileList{filepath.Join(c.dataDir, defaultTokenSecretFile)}
	}
	return nil
}

func (c *tokenCmd) run(context.Context) error {
	secrets, err := tokenSecrets(c.secrets[:1])
	if err != nil {
		return err
	}
	tok, err := httpapi.MintScopedToken(secrets[0], c.scope, c.user, c.ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(c.env.Stdout, tok)
	return nil
}
