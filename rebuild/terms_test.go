package rebuild_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/split"
)

// requireTermsSet fails unless every field of t is set (not its zero
// value) but those named in unset. It walks the record by reflection, so
// a term added to ledger.Terms is checked here with no edit: the test
// below fails until the scenario gives it a value that every path must
// carry.
func requireTermsSet(t *testing.T, terms ledger.Terms, what string, unset ...string) {
	t.Helper()
	v := reflect.ValueOf(terms)
	skip := map[string]bool{}
	for _, u := range unset {
		skip[u] = true
	}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if skip[name] {
			continue
		}
		require.False(t, v.Field(i).IsZero(), "%s: term %s is not set", what, name)
	}
}

// requireCampaignTerms checks that every field of c named as a field of
// the record holds the record's value (a time as ms since the epoch).
func requireCampaignTerms(t *testing.T, want ledger.Terms, c *hongbao.Campaign, what string) {
	t.Helper()
	wv, cv := reflect.ValueOf(want), reflect.ValueOf(c).Elem()
	held := 0
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		f := cv.FieldByName(name)
		if !f.IsValid() {
			continue // the ledger's own: an operator's close, the lost packets, the block size
		}
		held++
		got := f.Interface()
		if tm, ok := got.(time.Time); ok {
			got = tm.UnixMilli()
		} else {
			got = f.Convert(wv.Field(i).Type()).Interface()
		}
		require.Equal(t, wv.Field(i).Interface(), got, "%s: term %s", what, name)
	}
	require.GreaterOrEqual(t, held, 11, "the campaign holds the terms by their names")
}

// TestTermsRoundTrip: every term of a campaign, each set to a value that
// is not its zero, survives every path that carries terms: create records
// them in the ledger, an operator's close and a rebuild's lost packets
// join them, a rebuild (from the surviving root, then from the ledger
// alone after Redis lost everything) writes them back into the ledger and
// into the root's meta, Status reads them from there, and the spec that
// created the campaign still describes it (an idempotent create's
// comparison). The checks walk ledger.Terms by reflection: a term one of
// these paths drops fails here.
func TestTermsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, lg := range ledgers {
		t.Run(lg.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, lg.dsn(t))
			seed := uint64(1<<63 + 11)
			now := time.Now().Truncate(time.Millisecond)
			spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: 3000, Count: 20, Min: 60, Max: 400, Split: split.LineCut,
				Seed: &seed, OpensAt: now.Add(-time.Minute), ClosesAt: now.Add(time.Hour), Funding: "round-trip", Shards: 2}
			c, err := e.eng.Create(ctx, spec)
			require.NoError(t, err)
			require.NoError(t, e.l.Fund(ctx, ledger.Campaign{ID: c.ID, Funding: c.Funding, Total: c.Total}))
			require.True(t, spec.Describes(c), "the spec describes the campaign it created")

			created, err := e.l.Terms(ctx, c.ID)
			require.NoError(t, err)
			requireTermsSet(t, created, "create", "CloseReason", "ClosedAt", "Lost")
			requireCampaignTerms(t, created, c, "create")

			st, err := e.eng.CloseCampaign(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, hongbao.CloseOperator, st.CloseReason)
			want, err := e.l.Terms(ctx, c.ID)
			require.NoError(t, err)
			want.Lost = []int64{5} // as an earlier rebuild would have found it
			require.NoError(t, e.l.WriteTerms(ctx, c.ID, want))
			requireTermsSet(t, want, "close")

			for _, step := range []struct {
				name  string
				flush bool
			}{{"rebuild from the root", false}, {"rebuild from the ledger", true}} {
				if step.flush {
					flushAll(t, e.r.Client)
				}
				_, err := e.rebuild(e.r.Client, c.ID, true)
				require.NoError(t, err, step.name)

				got, err := e.l.Terms(ctx, c.ID)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s: the ledger's terms", step.name)

				root, err := redisstore.New(e.r.Client).Status(ctx, redisstore.Default.CampaignKeys(c.ID))
				require.NoError(t, err)
				meta := redisstore.TermsOf(root.Meta)
				noLost := want
				noLost.Lost = nil // the meta counts the lost packets
				require.Equal(t, noLost, meta, "%s: the root's meta", step.name)

				st, err := e.eng.Status(ctx, c.ID)
				require.NoError(t, err)
				requireCampaignTerms(t, want, &st.Campaign, step.name+": status")
				require.Equal(t, want.CloseReason, st.CloseReason, step.name)
				require.True(t, spec.Describes(&st.Campaign), "%s: the spec still describes the campaign", step.name)
			}
		})
	}
}
