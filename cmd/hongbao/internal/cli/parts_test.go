package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestSettlePartsFlag: --settle-parts out of range is a usage error for
// settle and serve, and a settle process counting other parts than a live
// one of the deployment exits with the reason.
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
	code, _, errs := run(t, nil, "settle", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--settle-parts", "8")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "different number of parts")
	cancel()
	require.Equal(t, 0, <-done, errb.String())
}
