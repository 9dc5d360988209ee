package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/settle"
)

// scrape gathers reg into "name{label=value,...}" -> value, the labels in
// the order the registry gives them; a histogram is its count.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			name := f.GetName()
			if len(ls) > 0 {
				name += "{" + strings.Join(ls, ",") + "}"
			}
			out[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// TestEngineCounts: an engine's collector counts each grab under the
// API's word for its outcome or error, each discount call under its
// operation and outcome, their latencies and batches; Close stops it and
// leaves what it counted.
func TestEngineCounts(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	m := metrics.NewEngine(eng)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 200, Count: 2})
	require.NoError(t, err)
	for _, u := range []string{"a", "a", "b", "c"} {
		_, err := eng.Grab(ctx, c.ID, u)
		require.NoError(t, err)
	}
	eng.SetSettleBusy([]string{c.ID})
	_, err = eng.Grab(ctx, c.ID, "d")
	require.ErrorIs(t, err, hongbao.ErrBusy)
	eng.SetSettleBusy(nil)
	_, err = eng.Grab(ctx, testenv.UniqueID(t), "e")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)

	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1000, Quota: 10, Max: 100})
	require.NoError(t, err)
	_, err = eng.Discounts().Reserve(ctx, d.ID, "kim", "o-1", 10_000)
	require.NoError(t, err)
	for range 2 {
		_, err = eng.Discounts().Confirm(ctx, d.ID, "kim", "o-1")
		require.NoError(t, err)
	}
	_, err = eng.Discounts().Cancel(ctx, d.ID, "kim", "o-1")
	require.ErrorIs(t, err, hongbao.ErrReservationConfirmed)

	got := scrape(t, reg)
	for series, want := range map[string]float64{
		"hongbao_grabs_total{outcome=granted}":                       2,
		"hongbao_grabs_total{outcome=already_granted}":               1,
		"hongbao_grabs_total{outcome=sold_out}":                      1,
		"hongbao_grabs_total{outcome=busy}":                          1,
		"hongbao_grabs_total{outcome=not_found}":                     1,
		"hongbao_grabs_total{outcome=closed}":                        0, // exported before the first
		"hongbao_grab_duration_seconds":                              6,
		"hongbao_discount_reserves_total{outcome=reserved}":          1,
		"hongbao_discount_reserves_total{outcome=exhausted}":         0,
		"hongbao_discount_confirms_total{outcome=confirmed}":         1,
		"hongbao_discount_confirms_total{outcome=already_confirmed}": 1,
		"hongbao_discount_cancels_total{outcome=confirmed}":          1,
		"hongbao_discount_reserve_duration_seconds":                  1,
		"hongbao_batch_duration_seconds{op=grab}":                    5, // the busy grab never queued
		"hongbao_batch_duration_seconds{op=confirm}":                 2,
		"hongbao_grab_batch_size":                                    5,
		"hongbao_wait_replicas":                                      0,
		"hongbao_wait_short_total{op=grab}":                          0,
	} {
		v, ok := got[series]
		require.True(t, ok, "%s is not exported", series)
		require.Equal(t, want, v, series)
	}

	m.Close()
	_, err = eng.Grab(ctx, c.ID, "f")
	require.NoError(t, err)
	require.Equal(t, 1.0, scrape(t, reg)["hongbao_grabs_total{outcome=sold_out}"], "no longer observing")
}

// TestObserveGrabAllocatesNothing: counting a grab whose outcome's series
// exists allocates nothing, so the metrics add no allocation to a grab.
func TestObserveGrabAllocatesNothing(t *testing.T) {
	m := metrics.NewEngine(nopEngine{})
	ev := hongbao.GrabEvent{Grant: hongbao.Grant{Campaign: "c", User: "u", Outcome: hongbao.Granted}, Duration: time.Millisecond}
	busy := hongbao.GrabEvent{Err: fmt.Errorf("grab c: %w", hongbao.ErrBusy)}
	m.ObserveGrab(busy) // its series made once
	require.Zero(t, testing.AllocsPerRun(100, func() {
		m.ObserveGrab(ev)
		m.ObserveGrab(busy)
		m.ObserveBatch(hongbao.BatchEvent{Op: "grab", Size: 3})
	}))
}

// nopEngine is an engine with nothing to observe.
type nopEngine struct{}

func (nopEngine) Observe(hongbao.Observer) func() { return func() {} }
func (nopEngine) Stats() hongbao.Stats            { return hongbao.Stats{} }

// stats are fixed counters of a settlement worker.
type stats settle.Stats

func (s stats) Stats() settle.Stats { return settle.Stats(s) }

// TestSettlementCounters: each counter of settle.Stats is exported under
// its name, with its value.
func TestSettlementCounters(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewSettlement(stats{Grants: 1, Discounts: 2, Replayed: 3, Conflicts: 4, Refused: 5, Malformed: 6,
		Deleted: 7, Failures: 8, Foreign: 9, Refunds: 10, Reaped: 11}))
	got := scrape(t, reg)
	require.Equal(t, map[string]float64{
		"hongbao_settlement_grants_total": 1, "hongbao_settlement_discounts_total": 2, "hongbao_settlement_replayed_total": 3,
		"hongbao_settlement_conflicts_total": 4, "hongbao_settlement_refused_total": 5, "hongbao_settlement_malformed_total": 6,
		"hongbao_settlement_deleted_total": 7, "hongbao_settlement_failures_total": 8, "hongbao_settlement_foreign_total": 9,
		"hongbao_settlement_refunds_total": 10, "hongbao_settlement_reaped_total": 11,
	}, got)
}

// TestErrorLabel: wrapped errors are labelled by their sentinel; others
// are "error".
func TestErrorLabel(t *testing.T) {
	t.Parallel()
	require.Equal(t, "outcome_unknown", metrics.ErrorLabel(fmt.Errorf("grab: %w", hongbao.ErrOutcomeUnknown)))
	require.Equal(t, "not_found", metrics.ErrorLabel(settle.ErrNoCampaign))
	require.Equal(t, "error", metrics.ErrorLabel(errors.New("connection reset")))
	require.Equal(t, "error", metrics.ErrorLabel(context.Canceled))
}

// TestLedgerUp: hongbao_ledger_up is 1 while the ledger answers and 0
// once it does not, read at most once a second however often Prometheus
// scrapes.
func TestLedgerUp(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var down error
	pings := 0
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewLedger(func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		pings++
		return down
	}))
	for range 50 {
		require.Equal(t, 1.0, scrape(t, reg)["hongbao_ledger_up"])
	}
	mu.Lock()
	require.Equal(t, 1, pings, "50 scrapes within a second, one ping")
	down = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	mu.Unlock()
	require.Eventually(t, func() bool { return scrape(t, reg)["hongbao_ledger_up"] == 0 }, 5*time.Second, 20*time.Millisecond)
}
