package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisserver"
)

// TestBenchDiscount runs --mode discount small, on its own redis-server:
// both designs measured, both checks passed, the ratio reported.
func TestBenchDiscount(t *testing.T) {
	if !redisserver.Available("") {
		t.Skip("redis-server is not installed")
	}
	t.Parallel()
	code, out, errs := run(t, nil, "bench", "--mode", "discount", "--quota", "600", "--users", "700", "--runs", "1",
		"--concurrency", "16", "--baseline-workers", "4", "--pin=false", "--json")
	require.Equal(t, 0, code, errs)
	var rep struct {
		Hongbao, Published struct {
			Payments       int64   `json:"payments"`
			PaymentsPerSec float64 `json:"payments_per_sec"`
			OK             bool    `json:"ok"`
		}
		Ratio float64 `json:"ratio"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.Hongbao.OK)
	require.True(t, rep.Published.OK)
	require.EqualValues(t, 600, rep.Hongbao.Payments)
	require.EqualValues(t, 600, rep.Published.Payments)
	require.Positive(t, rep.Ratio)

	code, out, _ = run(t, nil, "bench", "--mode=discount", "--quota", "50", "--users", "60", "--runs", "1", "--pin=false")
	require.Equal(t, 0, code)
	require.Contains(t, out, "hongbao / published:")
}

func TestBenchDiscountFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--quota", "0"}, {"--min", "3.00"}, {"--budget", "x"}, {"--runs", "0"}, {"--aof", "sometimes"},
		{"--redis", "redis://127.0.0.1:1", "--aof", "always"},
	} {
		code, _, errs := run(t, map[string]string{"HONGBAO_MODE": "discount"}, append([]string{"bench"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
	}
}
