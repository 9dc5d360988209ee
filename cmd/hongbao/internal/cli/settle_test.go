package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestDemoSettles: the demo's JSON reports the settlement, with a refund
// when fewer users than packets came.
func TestDemoSettles(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--packets", "500", "--users", "300", "--clicks", "2",
		"--ledger", "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"), "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.ReconcileOK, "reconcile: %+v", rep.Reconcile)
	require.EqualValues(t, 300, rep.Settled)
	require.Positive(t, rep.RefundCents)
	require.Equal(t, rep.TotalCents-rep.GrantedCents, rep.RefundCents)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, k := range []string{"settled", "refund_cents", "reconcile_ok", "caught_up_seconds"} {
		require.Contains(t, raw, k)
	}
	// Every grant is in the ledger before the close, the refund and the
	// reconcile that the lag adds.
	require.LessOrEqual(t, rep.CaughtUpSeconds, rep.SettleLagSeconds)
}

// TestSettleCommand: demo --settle=false leaves the grants in Redis;
// settle --drain settles and refunds them with the retention asked for;
// reconcile agrees, and says so in its exit status.
func TestSettleCommand(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--settle=false", "--packets", "400", "--users", "250", "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Zero(t, rep.Settled)
	id := rep.Campaign
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")

	// Before settling, reconcile finds the grants missing from the ledger
	// (which must exist: reconcile creates none).
	code, _, errs = run(t, nil, "migrate", "--ledger", dsn)
	require.Equal(t, 0, code, errs)
	code, out, _ = run(t, nil, "reconcile", "--campaign", id, "--redis", r.Addr, "--ledger", dsn, "--json")
	require.Equal(t, 1, code, out)
	var before settle.Report
	require.NoError(t, json.Unmarshal([]byte(out), &before))
	require.False(t, before.OK)
	require.EqualValues(t, 250, before.GrantedRedis)
	require.Zero(t, before.GrantedLedger)

	code, out, errs = run(t, nil, "settle", "--redis", r.Addr, "--ledger", dsn, "--campaigns", id,
		"--consumer", "cli-test", "--drain", "--retention", "1h", "--json")
	require.Equal(t, 0, code, errs)
	var st map[string]float64
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.EqualValues(t, 250, st["grants"], out)
	require.EqualValues(t, 1, st["refunds"], out)
	require.EqualValues(t, 1, st["rolled_up"], out)
	require.Contains(t, st, "rollup_seconds", out)

	ttl, err := r.Client.Do(context.Background(), r.Client.B().Pttl().Key(redisstore.Default.CampaignKeys(id).Meta).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, ttl)
	require.LessOrEqual(t, time.Duration(ttl)*time.Millisecond, time.Hour, "--retention sets the expiry")

	code, out, errs = run(t, nil, "reconcile", "--campaign", id, "--redis", r.Addr, "--ledger", dsn, "--json")
	require.Equal(t, 0, code, errs)
	var after settle.Report
	require.NoError(t, json.Unmarshal([]byte(out), &after))
	require.True(t, after.OK, "differences: %v", after.Differences)
	require.Equal(t, "settled", after.State)
	require.EqualValues(t, 250, after.GrantedLedger)
	require.Zero(t, after.EscrowCents)
	require.Equal(t, rep.TotalCents-rep.GrantedCents, after.RefundCents)

	l, err := openLedger(context.Background(), dsn)
	require.NoError(t, err)
	pending, err := l.PendingRollUps(context.Background(), 10)
	require.NoError(t, l.Close())
	require.NoError(t, err)
	require.Empty(t, pending, "the drain rolled the campaign up")

	code, _, errs = run(t, nil, "settle", "--redis", r.Addr, "--ledger", dsn, "--retention", "0s")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--retention")
}

// TestDemoAuditsBeforeTheRefund: with most of a large pool left, the
// audit of Redis reads it page by page after the close; the worker must
// not refund (and unlink the pool) in the middle of that read.
func TestDemoAuditsBeforeTheRefund(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--packets", "300000", "--users", "50", "--clicks", "1",
		"--ledger", "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"), "--json")
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), errs)
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.Equal(t, 0, code, errs)
	require.True(t, rep.ReconcileOK)
	require.Equal(t, rep.TotalCents-rep.GrantedCents, rep.RefundCents)
}
