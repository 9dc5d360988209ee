package settle_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/webhook"
	"github.com/hongbao/hongbao/webhook/webhooktest"
)

// totalsFunc is a TotalsSink in a function; called counts its calls.
type totalsFunc struct {
	fn     func(ctx context.Context, campaign string) (ledger.Totals, error)
	called int
}

func (f *totalsFunc) Totals(ctx context.Context, campaign string) (ledger.Totals, error) {
	f.called++
	return f.fn(ctx, campaign)
}

// identified is a TotalsSink with an identity.
type identified struct {
	*totalsFunc
	name string
}

func (s identified) Identity(context.Context) (string, error) { return s.name, nil }

// TestCompareSink: each way a sink's totals can disagree with Redis is
// named in the report; agreement is OK.
func TestCompareSink(t *testing.T) {
	t.Parallel()
	settled := settle.SinkCounts{Campaign: "c1", State: "settled", Funding: "acme", TotalCents: 1000,
		GrantedCount: 3, GrantedCents: 600, RefundedCents: 400}
	held := ledger.Totals{Funded: 1000, Funding: "acme", GrantCount: 3, GrantCents: 600, Refunded: 400, RefundDone: true}
	open := settled
	open.State, open.RefundedCents = "open", 0
	openHeld := held
	openHeld.Refunded, openHeld.RefundDone, openHeld.Escrow = 0, false, 400
	tests := []struct {
		name   string
		counts settle.SinkCounts
		mod    func(*ledger.Totals)
		err    error  // what the sink's Totals answers
		self   string // the sink's identity, if it has one
		want   []string
	}{
		{name: "settled, agreed", counts: settled},
		{name: "open, agreed", counts: open, mod: func(t *ledger.Totals) { *t = openHeld }},
		{name: "a grant missing", counts: settled, mod: func(t *ledger.Totals) { t.GrantCount, t.GrantCents, t.Escrow = 2, 500, 100 },
			want: []string{"grants: Redis granted 3 (600 cents), the sink holds 2 (500 cents)", "settled, yet the sink's escrow holds 100 cents"}},
		{name: "an amount changed", counts: settled, mod: func(t *ledger.Totals) { t.GrantCents = 601 },
			want: []string{"grants: Redis granted 3 (600 cents), the sink holds 3 (601 cents)"}},
		{name: "refund changed", counts: settled, mod: func(t *ledger.Totals) { t.Refunded = 399 },
			want: []string{"refund: the sink holds 399 cents (recorded true), Redis refunded 400"}},
		{name: "refund missing", counts: settled, mod: func(t *ledger.Totals) { t.Refunded, t.RefundDone = 0, false },
			want: []string{"refund: the sink holds 0 cents (recorded false), Redis refunded 400"}},
		{name: "refund too early", counts: open, mod: func(t *ledger.Totals) { *t = openHeld; t.RefundDone = true },
			want: []string{"the sink holds a refund of 0 cents while the campaign is open"}},
		{name: "not funded", counts: open, mod: func(t *ledger.Totals) { *t = ledger.Totals{} },
			want: []string{"fund: the sink holds 0 cents, the campaign total is 1000", "grants: Redis granted 3 (600 cents), the sink holds 0 (0 cents)"}},
		{name: "another funding account", counts: settled, mod: func(t *ledger.Totals) { t.Funding = "other" },
			want: []string{`fund: the sink's funding account is "other", the campaign's "acme"`}},
		{name: "Redis counters short", counts: func() settle.SinkCounts { c := settled; c.RefundedCents = 300; return c }(),
			mod:  func(t *ledger.Totals) { t.Refunded = 300 },
			want: []string{"Redis counters: granted 600 + refunded 300 != total 1000"}},
		{name: "unsettled and dead", counts: func() settle.SinkCounts { c := open; c.Unsettled, c.Dead = 2, 1; return c }(),
			mod:  func(t *ledger.Totals) { *t = openHeld },
			want: []string{"2 stream entries are not settled yet", "1 entries in the dead stream wait for an operator"}},
		{name: "owned by the sink", counts: func() settle.SinkCounts { c := settled; c.Owner = "wallet:a"; return c }(), self: "wallet:a"},
		{name: "owned elsewhere, by identity", counts: func() settle.SinkCounts { c := settled; c.Owner = "ledger:b"; return c }(), self: "wallet:a",
			want: []string{`the campaign is owned by "ledger:b", not by this sink ("wallet:a")`}},
		{name: "owned elsewhere, refused", counts: func() settle.SinkCounts { c := settled; c.Owner = "ledger:b"; return c }(),
			err:  &ledger.ForeignError{Campaign: "c1", Owner: "ledger:b", Ledger: "wallet:a"},
			want: []string{`the campaign is owned by "ledger:b", not by this sink ("wallet:a")`}},
		{name: "sink down", counts: settled, err: webhook.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &totalsFunc{fn: func(ctx context.Context, campaign string) (ledger.Totals, error) {
				require.Equal(t, "c1", campaign)
				owner, _ := ledger.OwnerFrom(ctx)
				require.Equal(t, tc.counts.Owner, owner, "the campaign's owner goes with the question")
				if tc.err != nil {
					return ledger.Totals{}, tc.err
				}
				tot := held
				if tc.mod != nil {
					tc.mod(&tot)
				}
				return tot, nil
			}}
			var sink settle.TotalsSink = f
			if tc.self != "" {
				sink = identified{f, tc.self}
			}
			rep, err := settle.CompareSink(t.Context(), sink, tc.counts)
			if tc.err != nil && !errors.Is(tc.err, ledger.ErrForeign) {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(tc.want) == 0, rep.OK, "%v", rep.Differences)
			require.Equal(t, len(tc.want), rep.DifferenceCount, "%v", rep.Differences)
			for i, w := range tc.want {
				require.Contains(t, rep.Differences[i], w)
			}
			if strings.Contains(tc.name, "by identity") {
				require.Zero(t, f.called, "a foreign campaign is not asked about")
			}
		})
	}
}

// TestReconcileSinkWebhook settles a rain into a host's wallet through the
// webhook, then reconciles the wallet against Redis: OK; tampered with (a
// grant dropped, the refund changed), the report names each difference;
// once the campaign records an owner, only the sink it names reconciles.
func TestReconcileSinkWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	secret := []byte(strings.Repeat("s", 32))
	const name = "wallet:reconcile-test"
	wallet := webhooktest.New(name, secret)
	srv := httptest.NewServer(wallet)
	defer srv.Close()
	sink, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, Name: name, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	require.NoError(t, err)

	c, err := e.eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 100_000, Count: 500, Shards: 2})
	require.NoError(t, err)
	granted, cents := rain(t, e.eng, c.ID, 300)
	require.EqualValues(t, 300, granted)

	// Before settlement, the wallet lacks everything.
	rep, err := settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Contains(t, strings.Join(rep.Differences, "\n"), "not settled yet")

	_, err = e.eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	w, err := settle.New(settle.Config{Redis: e.redis.Client, Sink: sink, Consumer: "hook", Logger: quiet(), Only: []string{c.ID}, Poll: 5 * time.Millisecond})
	require.NoError(t, err)
	_, err = w.Drain(ctx)
	require.NoError(t, err)

	rep, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.Equal(t, "settled", rep.State)
	require.EqualValues(t, 300, rep.GrantedLedger)
	require.Equal(t, cents, rep.GrantedCentsLedger)
	require.Equal(t, 100_000-cents, rep.RefundCents)
	require.Zero(t, rep.EscrowCents)

	var seq int64
	var dropped webhook.Grant
	for seq, dropped = range wallet.Grants(c.ID) {
		break
	}
	require.True(t, wallet.Drop(c.ID, seq))
	rep, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Contains(t, rep.Differences[0], "grants: Redis granted 300 ("+strconv.FormatInt(cents, 10)+" cents), the sink holds 299 ("+
		strconv.FormatInt(cents-dropped.Cents, 10)+" cents)")

	wallet.SetRefund(c.ID, 100_000-cents+1)
	rep, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.Contains(t, strings.Join(rep.Differences, "\n"),
		"refund: the sink holds "+strconv.FormatInt(100_000-cents+1, 10)+" cents (recorded true), Redis refunded "+strconv.FormatInt(100_000-cents, 10))

	// The campaign records its owner (as a create does): the wallet's name
	// passes and goes with the question, another's is refused unasked.
	meta := redisstore.Default.CampaignKeys(c.ID).Meta
	setOwner := func(owner string) {
		require.NoError(t, e.redis.Client.Do(ctx, e.redis.Client.B().Hset().Key(meta).FieldValue().FieldValue("owner", owner).Build()).Error())
	}
	setOwner(name)
	rep, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.Len(t, rep.Differences, 3, "%v", rep.Differences) // grants, refund, escrow: the wallet's tampering
	setOwner("ledger:another-deployment")
	rep, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{`the campaign is owned by "ledger:another-deployment", not by this sink ("wallet:reconcile-test"): it settles elsewhere`}, rep.Differences)
	require.Zero(t, wallet.Foreign(), "the sink asked nothing")

	_, err = settle.ReconcileSink(ctx, e.redis.Client, "", sink, testenv.UniqueID(t)+"x")
	require.ErrorIs(t, err, redisstore.ErrNoCampaign)
}

// TestReconcileSinkDiscount: a discount campaign settled into the ledger
// reconciles against the ledger's totals, which make it a TotalsSink too.
func TestReconcileSinkDiscount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: testenv.UniqueID(t), Budget: 1_000, Quota: 10,
		Min: 100, Max: 100, Shards: 2, Funding: "promo"})
	require.NoError(t, err)
	for u := range 6 {
		user := "x" + strconv.Itoa(u)
		_, err := e.eng.Discounts().Reserve(ctx, d.ID, user, "o", 500)
		require.NoError(t, err)
		_, err = e.eng.Discounts().Confirm(ctx, d.ID, user, "o")
		require.NoError(t, err)
	}
	_, err = e.eng.Discounts().CloseCampaign(ctx, d.ID)
	require.NoError(t, err)
	w := e.worker(t, e.l, "w1", d.ID)
	settleDiscount(t, e, w, d.ID)

	rep, err := settle.ReconcileSinkDiscount(ctx, e.redis.Client, "", e.l, d.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Differences)
	require.EqualValues(t, 6, rep.GrantedRedis)
	require.EqualValues(t, 600, rep.GrantedCentsLedger)
	require.EqualValues(t, 400, rep.RefundCents)

	// The worker claimed the campaign, which recorded no owner, for its
	// ledger: another ledger is not asked, it is named foreign.
	other := openSQLite(t)
	rep, err = settle.ReconcileSinkDiscount(ctx, e.redis.Client, "", other, d.ID)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Contains(t, rep.Differences[0], "it settles elsewhere")
}
