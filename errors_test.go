package hongbao_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/split"
)

// requireOnePrefix checks that err's message says "hongbao:" once, at its
// head.
func requireOnePrefix(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "hongbao: "), msg)
	require.Equal(t, 1, strings.Count(msg, "hongbao:"), msg)
}

// TestSpecErrors: a refused spec is a *SpecError naming the field, in the
// HTTP API's spelling, and why; it matches ErrInvalidSpec and keeps the
// split package's error in its chain.
func TestSpecErrors(t *testing.T) {
	t.Parallel()
	opens := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		spec   hongbao.Spec
		field  string
		reason string
		split  bool // the cause is a *split.SpecError
	}{
		{"zero packets", hongbao.Spec{Total: 100}, "count", "must be at least 1, got 0", true},
		{"zero total", hongbao.Spec{Count: 1}, "total", "must be at least 1 cent, got 0", true},
		{"more packets than cents", hongbao.Spec{Total: 100, Count: 101}, "total", "100 cents cannot give 101 packets of at least 1 cent", true},
		{"max below min", hongbao.Spec{Total: 100, Count: 2, Min: 10, Max: 5}, "max", "5 cents is below min 10 cents", true},
		{"unknown split", hongbao.Spec{Total: 100, Count: 1, Split: "magic"}, "split", `unknown "magic"; valid: double-average, line-cut, fixed`, true},
		{"closes before it opens", hongbao.Spec{Total: 100, Count: 1, OpensAt: opens, ClosesAt: opens.Add(-time.Hour)},
			"closes_at", "2030-01-01T23:00:00Z is not after opens_at 2030-01-02T00:00:00Z", false},
		{"closes within the millisecond it opens", hongbao.Spec{Total: 100, Count: 1, OpensAt: opens, ClosesAt: opens.Add(time.Microsecond)},
			"closes_at", "2030-01-02T00:00:00.000001Z is not after opens_at 2030-01-02T00:00:00Z", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.spec.Validate()
			require.ErrorIs(t, err, hongbao.ErrInvalidSpec)
			var se *hongbao.SpecError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.field, se.Field)
			require.Equal(t, tc.reason, se.Reason)
			require.Equal(t, "hongbao: invalid campaign spec: "+tc.field+": "+tc.reason, err.Error())
			requireOnePrefix(t, err)
			var splitErr *split.SpecError
			require.Equal(t, tc.split, errors.As(err, &splitErr))
			require.Equal(t, tc.split, errors.Is(err, split.ErrInvalidSpec))
		})
	}
	require.NoError(t, hongbao.Spec{Total: 100, Count: 1, OpensAt: opens, ClosesAt: opens.Add(time.Millisecond)}.Validate())
	var idErr *hongbao.IDError
	require.ErrorAs(t, hongbao.Spec{ID: "a b", Total: 100, Count: 1}.Validate(), &idErr)
	require.Equal(t, "campaign", idErr.Kind)
	require.ErrorAs(t, hongbao.Spec{Funding: "a b", Total: 100, Count: 1}.Validate(), &idErr)
	require.Equal(t, "account", idErr.Kind)
}

// TestTypedErrorsStandAlone: each typed error matches its sentinel and
// reads with the package prefix once.
func TestTypedErrorsStandAlone(t *testing.T) {
	t.Parallel()
	_, err := hongbao.ParseCents("1.005")
	var ae *hongbao.AmountError
	require.ErrorAs(t, err, &ae)
	require.ErrorIs(t, err, hongbao.ErrInvalidAmount)
	require.Equal(t, "1.005", ae.Input)
	require.Equal(t, `hongbao: invalid amount "1.005": want at most two decimals, as in 12.34`, err.Error())

	err = hongbao.ValidateUserID("a b")
	require.ErrorIs(t, err, hongbao.ErrInvalidID)
	require.Equal(t, `hongbao: invalid user id "a b": allowed are A-Z a-z 0-9 and _-.:@`, err.Error())

	err = &hongbao.ExistsError{ID: "c1", State: hongbao.StateOpen}
	require.ErrorIs(t, err, hongbao.ErrCampaignExists)
	require.Equal(t, `hongbao: campaign "c1" exists (state open)`, err.Error())

	for _, s := range []error{hongbao.ErrCampaignNotFound, hongbao.ErrNoGrant, hongbao.ErrBusy, hongbao.ErrInvalidSpec} {
		requireOnePrefix(t, s)
	}
	require.NotErrorIs(t, hongbao.ErrCampaignNotFound, hongbao.ErrNoGrant)
}

// TestEngineErrorChains: the engine's errors name the operation and the
// campaign after one package prefix, then the cause, and still match the
// sentinels and the store's errors below them.
func TestEngineErrorChains(t *testing.T) {
	t.Parallel()
	eng, _ := newEngine(t)
	ctx := context.Background()
	id := testenv.UniqueID(t)

	_, err := eng.Grab(ctx, id, "alice")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	require.Equal(t, "hongbao: grab "+id+": campaign not found", err.Error())

	_, err = eng.Status(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	require.ErrorIs(t, err, redisstore.ErrNoCampaign, "the store's error stays in the chain")
	require.True(t, strings.HasPrefix(err.Error(), "hongbao: status "+id+": campaign not found: "), err.Error())
	requireOnePrefix(t, err)

	_, err = eng.CloseCampaign(ctx, id)
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	require.True(t, strings.HasPrefix(err.Error(), "hongbao: close "+id+": campaign not found: "), err.Error())
	requireOnePrefix(t, err)

	_, err = eng.Held(ctx, id, "alice")
	require.ErrorIs(t, err, hongbao.ErrCampaignNotFound)
	requireOnePrefix(t, err)

	// The Redis clock refuses a window that has ended: the field and why.
	_, err = eng.Create(ctx, hongbao.Spec{ID: id, Total: 100, Count: 1, ClosesAt: time.Now().Add(-time.Hour)})
	var se *hongbao.SpecError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, hongbao.ErrInvalidSpec)
	require.ErrorIs(t, err, redisstore.ErrWindow)
	require.Equal(t, "closes_at", se.Field)
	require.Equal(t, "hongbao: create "+id+": invalid campaign spec: closes_at: is already past", err.Error())

	_, err = eng.Create(ctx, hongbao.Spec{ID: id, Total: 100, Count: 1, OpensAt: time.Now().Add(-48 * time.Hour)})
	require.ErrorAs(t, err, &se)
	require.Equal(t, "opens_at", se.Field)
	require.Contains(t, se.Reason, "24h0m0s")
	requireOnePrefix(t, err)
}
