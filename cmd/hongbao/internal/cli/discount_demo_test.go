package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

// TestDiscountDemoDefaults: with its defaults, discount-demo ends with
// conservation_ok and reconcile_ok, and its JSON has the documented
// fields.
func TestDiscountDemoDefaults(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "discount-demo", "--redis", r.Addr, "--json")
	require.Equal(t, 0, code, errs)
	var rep discountDemoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.True(t, rep.ReconcileOK, "%+v", rep.Reconcile)
	require.EqualValues(t, 100000, rep.BudgetCents)
	require.Equal(t, rep.BudgetCents, rep.ConfirmedCents+rep.RemainingCents)
	require.EqualValues(t, 800, rep.ConfirmedCount+rep.RemainingCount)
	require.Zero(t, rep.OverLimitUsers)
	require.Equal(t, rep.RemainingCents, rep.RefundCents, "the leftover is refunded")
	require.EqualValues(t, 2000, rep.Orders)
	require.Positive(t, rep.Cancelled)
	require.Positive(t, rep.Abandoned)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, k := range []string{"budget_cents", "confirmed_cents", "confirmed_count", "remaining_cents", "remaining_count",
		"over_limit_users", "conservation_ok", "reconcile_ok"} {
		require.Contains(t, raw, k)
	}
}

// TestDiscountDemoReport: the readable report, limits reached, over one
// shard, settings from the environment.
func TestDiscountDemoReport(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	env := map[string]string{"HONGBAO_REDIS": r.Addr, "HONGBAO_SHARDS": "1", "HONGBAO_QUOTA": "300", "HONGBAO_BUDGET": "400.00",
		"HONGBAO_MAX": "3.00", "HONGBAO_PER_USER_AMOUNT": "4.00", "HONGBAO_ORDERS": "4", "HONGBAO_USERS": "200"}
	code, out, errs := run(t, env, "discount-demo")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "400.00 over 300 discounts")
	require.Contains(t, out, "OK: every cent and every discount accounted for")
	require.Contains(t, out, "OK: Redis and the ledger agree to the cent")
}

func TestDiscountDemoBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--budget", "1.005"}, "--budget"},
		{[]string{"--quota", "0"}, "--quota must be at least 1"},
		{[]string{"--min", "6.00"}, "--min: 600 cents is above max 500 cents"},
		{[]string{"--max", "2000.00"}, "--max"},
		{[]string{"--per-user-amount", "0.00", "--min", "0.50"}, ""},
		{[]string{"--per-user-amount", "0.10", "--min", "0.50"}, "--per-user-amount"},
		{[]string{"--cancel-share", "0.7", "--abandon-share", "0.5"}, "sum to at most 1"},
		{[]string{"--hold", "10ms"}, "--hold"},
		{[]string{"--shards", "0"}, "--shards must be at least 1"},
		{[]string{"--seed", "x"}, "--seed"},
	} {
		code, _, errs := run(t, nil, append([]string{"discount-demo", "--redis", "redis://127.0.0.1:1"}, tc.args...)...)
		if tc.msg == "" {
			require.Equal(t, 1, code, "valid flags; only the Redis is unreachable: %s", errs)
			continue
		}
		require.Equal(t, 2, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.msg, "%v", tc.args)
	}
}
