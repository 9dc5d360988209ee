package client

import (
	"testing"
	"time"

	"github.com/hongbao/hongbao/client/hongbaov1"
)

// TestStatusesCoverSentinels: every code with a sentinel has the status
// its JSON route answers, so a procedure's error gets one.
func TestStatusesCoverSentinels(t *testing.T) {
	for code := range sentinels {
		if statuses[code] == 0 {
			t.Errorf("code %s has no status", code)
		}
	}
}

// TestWords: an enum value's API word is its name after the prefix, in
// lower case; UNSPECIFIED is no answer.
func TestWords(t *testing.T) {
	for _, tc := range []struct{ name, prefix, want string }{
		{hongbaov1.GrabOutcome_GRAB_OUTCOME_ALREADY_GRANTED.String(), "GRAB_OUTCOME_", AlreadyGranted},
		{hongbaov1.GrabOutcome_GRAB_OUTCOME_SOLD_OUT.String(), "GRAB_OUTCOME_", SoldOut},
		{hongbaov1.ReserveOutcome_RESERVE_OUTCOME_NOT_OPEN.String(), "RESERVE_OUTCOME_", NotOpen},
		{hongbaov1.OrderState_ORDER_STATE_EXPIRED.String(), "ORDER_STATE_", Expired},
	} {
		got, err := word(tc.name, tc.prefix)
		if err != nil || got != tc.want {
			t.Errorf("word(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := word(hongbaov1.GrabOutcome_GRAB_OUTCOME_UNSPECIFIED.String(), "GRAB_OUTCOME_"); err == nil {
		t.Error("UNSPECIFIED is an answer")
	}
	for ms, want := range map[int64]time.Duration{0: 0, 1: time.Second, 1000: time.Second, 1001: 2 * time.Second} {
		if got := wholeSeconds(ms); got != want {
			t.Errorf("wholeSeconds(%d) = %v, want %v", ms, got, want)
		}
	}
}
