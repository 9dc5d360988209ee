package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/metrics"
)

// TestMetricLabelsAreTheAPIsWords: package metrics counts grabs and
// discount calls under the words the API answers them with (a repeated
// confirm or cancel under already_ and the word), so a dashboard reads
// what a client reads. (Failed calls: TestErrorTable.)
func TestMetricLabelsAreTheAPIsWords(t *testing.T) {
	t.Parallel()
	require.Len(t, hongbao.GrabOutcomes(), 7)
	for _, o := range hongbao.GrabOutcomes() {
		require.Equal(t, o.String(), metrics.GrabLabel(hongbao.GrabEvent{Grant: hongbao.Grant{Outcome: o}}), o)
	}
	require.Len(t, hongbao.ReserveOutcomes(), 8)
	for _, o := range hongbao.ReserveOutcomes() {
		r := hongbao.Reservation{Outcome: o}
		require.Equal(t, reserveJSON(r).Outcome, metrics.DiscountLabel(hongbao.DiscountEvent{Op: hongbao.OpReserve, Reservation: r}), o)
	}
	for _, tc := range []struct {
		op     hongbao.DiscountOp
		state  hongbao.ReservationState
		answer func(hongbao.Reservation) orderOut
	}{
		{hongbao.OpConfirm, hongbao.Confirmed, confirmJSON},
		{hongbao.OpCancel, hongbao.Cancelled, cancelJSON},
		{hongbao.OpCancel, hongbao.Expired, cancelJSON},
	} {
		for _, repeat := range []bool{false, true} {
			r := hongbao.Reservation{State: tc.state, Again: repeat}
			want := tc.answer(r).Outcome
			if repeat {
				want = "already_" + want
			}
			require.Equal(t, want, metrics.DiscountLabel(hongbao.DiscountEvent{Op: tc.op, Reservation: r}), "%v %v", tc.op, r)
		}
	}
}
