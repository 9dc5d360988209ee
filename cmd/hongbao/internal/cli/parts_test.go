package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestSettlePartsFlag: --settle-parts out of range is a usage error for
// settle and serve, and a process counting other parts than a live one of
// the deployment exits with the reason, in every mode that settles; serve
// --settle=false, which settles nothing, starts whatever its settlement
// flags say.
func TestSettlePartsFlag(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"settle", "serve"} {
		for _, v := range []string{"0", "5000"} {
			code, _, errs := run(t, nil, cmd, "--redis", "redis://127.0.0.1:1", "--ledger", "sqlite:x.db", "--settle-parts", v)
			require.Equal(t, 2, code, "%s --settle-parts %s: %s", cmd, v, errs)
			require.Contains(t, errs, "--settle-parts must be 1-1024")
		}
	}

	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	ctx, cancel := context.WithCancel(context.Background())
	errb := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--settle-parts", "16", "--lease-ttl", "1s"},
			&IO{Stdout: &syncBuffer{}, Stderr: errb, Getenv: func(string) string { return "" }})
	}()
	c := fx.redis.Client
	waitFor(t, "the first process's announcement", 10*time.Second, func() bool {
		n, err := c.Do(t.Context(), c.B().Hlen().Key("hb:lease:{scheduler}:parts").Build()).AsInt64()
		return err == nil && n == 1
	})
	// Every mode that settles is refused the same way: a settle, a
	// drain of one part or several (a drain takes no lease but settles),
	// a serve that settles (the default).
	for _, args := range [][]string{
		{"settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--settle-parts", "8"},
		{"settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--drain"},
		{"settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--drain", "--settle-parts", "4"},
		append([]string{"serve"}, fx.args()...),
	} {
		code, _, errs := run(t, nil, args...)
		require.Equal(t, 1, code, "%v: %s", args, errs)
		require.Contains(t, errs, "different number of parts", "%v", args)
	}
	// A serve that settles nothing is never refused over a settlement
	// setting, not even one out of range.
	p := startServe(t, fx.args("--settle=false", "--settle-parts", "0", "--lease-ttl", "1ms", "--reap-every", "1ms")...)
	require.Contains(t, p.stderr.String(), "--settle=false settles nothing")
	p.stop(t)
	cancel()
	require.Equal(t, 0, <-done, errb.String())
}
