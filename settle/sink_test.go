package settle_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/postgres"
	"github.com/hongbao/hongbao/ledger/sqlite"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/webhook"
)

// The sinks of this module, held to the interfaces the worker looks
// for. The ledgers settle discount campaigns; the webhook does not
// (TestSinkWithoutDiscounts).
var (
	_ settle.Sink         = (*sqlite.Ledger)(nil)
	_ settle.DiscountSink = (*sqlite.Ledger)(nil)
	_ settle.Sink         = (*postgres.Ledger)(nil)
	_ settle.DiscountSink = (*postgres.Ledger)(nil)
	_ settle.Sink         = (*webhook.Sink)(nil)
	_ settle.TotalsSink   = (*webhook.Sink)(nil)
)

// sinkOnly is a ledger seen through settle.Sink alone, as a host's own
// sink that does not implement DiscountSink.
type sinkOnly struct{ settle.Sink }

// TestSinkWithoutDiscounts: a sink that is not a DiscountSink settles red
// packet campaigns and leaves discount campaigns alone: their confirmed
// discounts stay pending in Redis, unrefunded and registered, and the
// worker says so once in its log. The webhook's sink is such a sink.
func TestSinkWithoutDiscounts(t *testing.T) {
	t.Parallel()
	var sink settle.Sink = &webhook.Sink{}
	_, ok := sink.(settle.DiscountSink)
	require.False(t, ok, "the webhook takes no discounts: docs/settlement.md says so")

	e := newEnv(t)
	ctx := context.Background()
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1_000, Quota: 10, Min: 100, Max: 100})
	require.NoError(t, err)
	_, err = e.eng.Discounts().Reserve(ctx, d.ID, "u1", "o1", 500)
	require.NoError(t, err)
	_, err = e.eng.Discounts().Confirm(ctx, d.ID, "u1", "o1")
	require.NoError(t, err)
	_, err = e.eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)

	var log bytes.Buffer
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: sinkOnly{e.l}, Consumer: "w1", Only: []string{d.ID},
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	for range 3 {
		_, err = w.Drain(ctx)
		require.NoError(t, err)
	}
	st, err := e.eng.Discounts().Status(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, hongbao.StateClosed, st.State, "never settled")
	require.Zero(t, st.RefundedCents)
	tot, err := e.l.Totals(ctx, ledger.DiscountCampaign(d.ID))
	require.NoError(t, err)
	require.Zero(t, tot.GrantCount, "no discount reached the sink")
	require.Zero(t, w.Stats().Discounts)
	ids, err := e.eng.Discounts().Campaigns(ctx)
	require.NoError(t, err)
	require.Contains(t, ids, d.ID, "still registered, for a worker whose sink takes discounts")
	require.Equal(t, 1, strings.Count(log.String(), "the sink takes no discounts"), log.String())
}
