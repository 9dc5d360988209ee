package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/browsertest"
	"github.com/hongbao/hongbao/internal/testenv"
)

// TestMain runs the tests, and fails the run when one of them left a
// serve's default data directory (hongbao-data, generated secrets in it)
// in the package directory: every serve a test starts gets a data
// directory of the test's.
func TestMain(m *testing.M) {
	_, err := os.Stat(defaultDataDir)
	before := err == nil
	code := testenv.Main(m, browsertest.Close)
	if _, err := os.Stat(defaultDataDir); err == nil && !before {
		fmt.Fprintf(os.Stderr, "FAIL: a test wrote %s/ in the package directory: give its serve --data-dir t.TempDir()\n", defaultDataDir)
		code = 1
	}
	os.Exit(code)
}

// run runs the CLI in-process with a clean environment plus env.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &IO{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return code, out.String(), errb.String()
}

func TestDemoJSON(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	code, out, errs := run(t, nil, "demo", "--redis", r.Addr, "--packets", "2000", "--users", "5000", "--clicks", "3", "--concurrency", "64", "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.Zero(t, rep.DuplicateUsers)
	require.EqualValues(t, 15000, rep.Attempts)
	require.EqualValues(t, 2000, rep.Granted)
	require.EqualValues(t, 1000000, rep.TotalCents)
	require.EqualValues(t, 1000000, rep.GrantedCents)
	require.Zero(t, rep.RemainingCents)
	require.Equal(t, rep.Attempts, rep.Granted+rep.Already+rep.SoldOut)
	// The JSON has the documented fields.
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, k := range []string{"campaign", "packets", "total_cents", "users", "attempts", "granted", "already", "sold_out",
		"granted_cents", "remaining_cents", "duplicate_users", "conservation_ok", "seconds", "grabs_per_sec"} {
		require.Contains(t, raw, k)
	}
}

func TestDemoReportAndEnv(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	env := map[string]string{"HONGBAO_REDIS": r.Addr, "HONGBAO_PACKETS": "300", "HONGBAO_USERS": "200", "HONGBAO_TOTAL": "50.00", "HONGBAO_SPLIT": "line-cut"}
	code, out, errs := run(t, env, "demo")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "300 packets")
	require.Contains(t, out, "Amounts granted:")
	require.Contains(t, out, "luckiest user")
	require.Contains(t, out, "OK: every cent accounted for")
	// Fewer users than packets: 200 granted, 100 left in the pool.
	require.Contains(t, out, "in 100 packets")
}

// TestDemoOnEmulator: with no redis-server to start, demo runs on the
// in-process emulator behind a banner.
func TestDemoOnEmulator(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, nil, "demo", "--redis-server", "/nonexistent/redis-server", "--packets", "200", "--users", "500", "--concurrency", "16", "--json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "IN-PROCESS EMULATOR")
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.Equal(t, "emulator", rep.Redis)
	require.EqualValues(t, 200, rep.Granted)
}

// TestDemoEmbedded: with no --redis, demo starts and stops its own
// redis-server.
func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	testenv.SharedRedis(t) // skips or fails like every Redis test when redis-server is missing
	code, out, errs := run(t, nil, "demo", "--packets", "100", "--users", "150", "--json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `"redis":"embedded"`)
	require.Contains(t, out, `"conservation_ok":true`)
}

func TestDemoBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"three decimals", []string{"--total", "1.005"}, 2, "at most two decimals"},
		{"zero total", []string{"--total", "0"}, 2, "total"},
		{"negative total", []string{"--total", "-5"}, 2, "must not be negative"},
		{"zero packets", []string{"--packets", "0"}, 2, "--packets must be at least 1"},
		{"negative users", []string{"--users", "-1"}, 2, "--users must be at least 1"},
		{"more packets than cents", []string{"--total", "1.00", "--packets", "101"}, 2, "101 packets"},
		{"unknown split", []string{"--split", "magic"}, 2, "magic"},
		{"bad seed", []string{"--seed", "x"}, 2, "--seed"},
		{"unreachable redis", []string{"--redis", "redis://127.0.0.1:1"}, 1, "cannot reach Redis"},
		{"stray argument", []string{"extra"}, 2, "unexpected argument"},
		{"unknown flag", []string{"--nope"}, 2, "nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := run(t, nil, append([]string{"demo"}, tc.args...)...)
			require.Equal(t, tc.code, code, errs)
			require.Contains(t, errs, tc.msg)
			require.NotContains(t, errs, "panic")
			require.NotContains(t, errs, ": hongbao:", "the library's prefix stutters after the command's")
			require.NotContains(t, errs, ": split:", "the split package's prefix stutters after the flag's")
		})
	}
	code, _, errs := run(t, map[string]string{"HONGBAO_PACKETS": "many"}, "demo")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "HONGBAO_PACKETS")
}

func TestHelpAndUnknownCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, nil, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "demo")
	code, _, errs := run(t, nil, "nosuch")
	require.Equal(t, 2, code)
	require.True(t, strings.Contains(errs, "unknown command"))
}

// TestCheckCanFail feeds the invariant check answers that break each
// invariant and requires it to notice: a check that cannot fail is no check.
func TestCheckCanFail(t *testing.T) {
	t.Parallel()
	// Two users, two packets of 60 and 40 cents, both granted.
	good := func() []toldUser {
		return []toldUser{
			{answers: []answer{{hongbao.Granted, 1, 60}, {hongbao.Already, 1, 60}}},
			{answers: []answer{{hongbao.Already, 2, 40}, {hongbao.Granted, 2, 40}}},
		}
	}
	audit := func() *hongbao.Audit {
		return &hongbao.Audit{
			Status:      &hongbao.Status{Campaign: hongbao.Campaign{Total: 100, Count: 2}, GrantedCount: 2, GrantedCents: 100},
			StreamCount: 2, StreamCents: 100, ClaimsCount: 2, ClaimsCents: 100,
		}
	}
	rep := &demoReport{TotalCents: 100}
	check(rep, good(), audit())
	require.True(t, rep.ConservationOK, "the honest case passes: %v", rep.Problems)

	cases := map[string]func(told []toldUser, a *hongbao.Audit){
		"a user told two packets": func(told []toldUser, a *hongbao.Audit) {
			told[0].answers[1] = answer{hongbao.Already, 2, 40}
		},
		"a user granted twice": func(told []toldUser, a *hongbao.Audit) {
			told[0].answers[1] = answer{hongbao.Granted, 1, 60}
		},
		"a packet told to two users": func(told []toldUser, a *hongbao.Audit) {
			told[1].answers = []answer{{hongbao.Granted, 1, 60}, {hongbao.Already, 1, 60}}
		},
		"the claims hold less than the clients were told": func(told []toldUser, a *hongbao.Audit) {
			a.ClaimsCount, a.ClaimsCents = 1, 60
		},
		"a cent missing from the pool": func(told []toldUser, a *hongbao.Audit) {
			told[1].answers = []answer{{hongbao.SoldOut, 0, 0}, {hongbao.SoldOut, 0, 0}}
			a.ClaimsCount, a.ClaimsCents = 1, 60
			a.PoolCount, a.PoolCents = 1, 39
		},
		"ALREADY without GRANTED": func(told []toldUser, a *hongbao.Audit) {
			told[0].answers[0] = answer{hongbao.Already, 1, 60}
		},
		"the audit of Redis failed": func(told []toldUser, a *hongbao.Audit) {
			a.ProblemCount, a.Problems = 1, []string{"claims and stream differ"}
		},
	}
	for name, breakIt := range cases {
		told, a := good(), audit()
		breakIt(told, a)
		rep := &demoReport{TotalCents: 100}
		check(rep, told, a)
		require.False(t, rep.ConservationOK, name)
		require.NotEmpty(t, rep.Problems, name)
	}
}
