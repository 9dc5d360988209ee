package settle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// settleHearer keeps the settlement results it hears.
type settleHearer struct {
	hongbao.NopObserver
	mu     sync.Mutex
	events []hongbao.SettleEvent
}

func (h *settleHearer) ObserveSettle(ev hongbao.SettleEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

// sum adds up the counts heard of kind, and lists the campaigns named.
func (h *settleHearer) sum(kind hongbao.SettleKind) (n int64, campaigns []string, errs []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range h.events {
		if ev.Kind == kind {
			n += ev.Count
			campaigns = append(campaigns, ev.Campaign)
			errs = append(errs, ev.Err)
		}
	}
	return n, campaigns, errs
}

// TestObserversHearSettlement: every observer of settle.Config.Observers
// hears the grants written, as Stats counts them, the refund with its
// campaign, and a failed pass with its error and no campaign.
func TestObserversHearSettlement(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 10_000, Count: 50})
	require.NoError(t, err)
	granted, _ := rain(t, e.eng, c.ID, 30)
	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)

	a, b := &settleHearer{}, &settleHearer{}
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Ledger: e.l, Consumer: "observed", Logger: quiet(),
		Only: []string{c.ID}, Observers: []hongbao.Observer{a, b}})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)
	require.EqualValues(t, granted, w.Stats().Grants)
	for _, h := range []*settleHearer{a, b} {
		n, _, _ := h.sum(hongbao.SettleGrants)
		require.Equal(t, granted, n)
		n, campaigns, _ := h.sum(hongbao.SettleRefund)
		require.EqualValues(t, 1, n)
		require.Equal(t, []string{c.ID}, campaigns)
	}

	// A ledger that is gone: each pass fails, and is heard with its cause.
	d, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100, Count: 1})
	require.NoError(t, err)
	rain(t, e.eng, d.ID, 1)
	l := openSQLite(t)
	require.NoError(t, l.Close())
	failed := &settleHearer{}
	w, err = settle.New(settle.Config{Redis: e.redis.Client, Ledger: l, Consumer: "observed", Logger: quiet(),
		Only: []string{d.ID}, MaxBackoff: 10 * time.Millisecond, Observers: []hongbao.Observer{failed}})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = w.Drain(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n, campaigns, errs := failed.sum(hongbao.SettleFailed)
	require.Positive(t, n)
	require.EqualValues(t, w.Stats().Failures, n)
	require.Empty(t, campaigns[0])
	require.Error(t, errs[0])
	require.Equal(t, "failed", hongbao.SettleFailed.String())
}
