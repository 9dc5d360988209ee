package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/httpapi"
)

// tokenCmd is "hongbao token": a user token minted from serve's secret.
type tokenCmd struct {
	base
	user    string
	ttl     time.Duration
	secrets fileList
	dataDir string
	scope   httpapi.TokenScope
}

func newTokenCmd(env *IO) command { return &tokenCmd{base: base{env: env}} }

func (c *tokenCmd) parseFlags(args []string) error {
	fs := newFlagSet("token", c.env)
	fs.StringVar(&c.user, "user", "", "user id, the token's sub (required)")
	fs.DurationVar(&c.ttl, "ttl", time.Hour, "lifetime of the token")
	fs.Var(&c.secrets, "token-secret-file", "file holding the secret, as [kid=]PATH (the first is used); default: <data-dir>/token.secret")
	fs.StringVar(&c.scope.Issuer, "issuer", "", "the token's iss, as serve's --token-issuer checks it; default: none")
	fs.StringVar(&c.scope.Audience, "audience", "", "the token's aud, as serve's --token-audience checks it; default: none")
	fs.StringVar(&c.dataDir, "data-dir", "hongbao-data", "serve's data directory, for the default secret")
	if err := parseFlags(fs, c.env, args); err != nil {
		return err
	}
	if err := hongbao.ValidateUserID(c.user); err != nil {
		return usageErrorf("--user: %v", err)
	}
	if c.ttl <= 0 {
		return usageErrorf("--ttl must be positive")
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
