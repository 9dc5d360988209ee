package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hongbao/hongbao/internal/history"
)

func elected(at string, tok int64) string {
	return fmt.Sprintf(`{"time":"%s","level":"INFO","msg":"elected","component":"leader","lease":"scheduler","token":%d}`, at, tok)
}

// TestFencing: the drill's reading of the scheduler's elections passes a
// log whose tokens only grow (a kept token is the same term) and fails one
// whose token goes back or does not grow past the failover.
func TestFencing(t *testing.T) {
	failover, _ := time.Parse(time.RFC3339, "2026-01-01T10:05:00Z")
	other := `{"time":"2026-01-01T10:00:01Z","level":"INFO","msg":"scheduler lease acquired","token":1}`
	for _, tc := range []struct {
		name      string
		log       []string
		restarted bool
		problems  int
	}{
		{"grows", []string{elected("2026-01-01T10:00:00Z", 10), other, elected("2026-01-01T10:06:00Z", 12)}, true, 0},
		{"kept through the failover, new after the restart",
			[]string{elected("2026-01-01T10:00:00Z", 10), elected("2026-01-01T10:05:30Z", 10), elected("2026-01-01T10:08:00Z", 11)}, true, 0},
		{"came back", []string{elected("2026-01-01T10:00:00Z", 10), elected("2026-01-01T10:06:00Z", 1)}, true, 2},
		{"no new token though restarted", []string{elected("2026-01-01T10:00:00Z", 10), elected("2026-01-01T10:06:00Z", 10)}, true, 1},
		{"kept, not restarted", []string{elected("2026-01-01T10:00:00Z", 10), elected("2026-01-01T10:06:00Z", 10)}, false, 0},
		{"no election", []string{other, "not json"}, false, 1},
	} {
		_, problems := fencing([]byte(strings.Join(tc.log, "\n")), failover, tc.restarted)
		if len(problems) != tc.problems {
			t.Errorf("%s: problems %q, want %d", tc.name, problems, tc.problems)
		}
	}
}

// TestClassify: how an answer becomes a history result; a refused
// connection is the only refusal the rolling restart counts.
func TestClassify(t *testing.T) {
	errBody := func(code string) map[string]any { return map[string]any{"error": map[string]any{"code": code}} }
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		kind    history.Kind
		code    int
		m       map[string]any
		err     error
		result  history.Result
		outcome string
	}{
		{history.Grab, 200, map[string]any{"outcome": "granted", "packet_id": "c/1", "amount_cents": 7.0}, nil, history.OK, "granted"},
		{history.Held, 200, map[string]any{"packet_id": "c/1", "amount_cents": 7.0}, nil, history.OK, "held"},
		{history.Held, 404, errBody("no_grant"), nil, history.OK, history.NoGrant},
		{history.Cancel, 409, errBody("confirmed"), nil, history.OK, "confirmed"},
		{history.Grab, 503, errBody("outcome_unknown"), nil, history.Unknown, ""},
		{history.Grab, 0, nil, io.ErrUnexpectedEOF, history.Unknown, ""},
		{history.Grab, 0, nil, dial, history.Fail, ""},
		{history.Grab, 429, errBody("rate_limited"), nil, history.Fail, ""},
	} {
		op := history.Op{Kind: tc.kind}
		classify(&op, tc.code, tc.m, tc.err)
		if op.Result != tc.result || op.Outcome != tc.outcome {
			t.Errorf("%d %v %v: got %s %q, want %s %q", tc.code, tc.m, tc.err, op.Result, op.Outcome, tc.result, tc.outcome)
		}
	}
	if !refused(dial) || refused(io.ErrUnexpectedEOF) {
		t.Error("refused: a dial error only")
	}
}

// TestParseFlags: the faults are checked by name, and the sizes bounded.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-faults", "master-stop, api-kill"}, io.Discard)
	if err != nil || strings.Join(c.faults, ",") != "master-stop,api-kill" || c.secrets != "deploy/compose/secrets" {
		t.Fatalf("%v %+v", err, c)
	}
	for _, args := range [][]string{{"-faults", "master-stopp"}, {"-users", "3"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
