package httpapi

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRPCCodesDocumented: docs/service.md's table of error codes is
// errorCodes, row for row: each code with its HTTP status and its
// Connect/gRPC code (by name and number), and no code missing or extra.
func TestRPCCodesDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/service.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| code | JSON route | Connect / gRPC |\n|---|---|---|\n")
	require.True(t, ok, "docs/service.md has no table of codes")
	table, _, _ = strings.Cut(table, "\n\n")
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (\\d{3}) \\| `([a-z_]+)` \\((\\d+)\\) \\|$")
	seen := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		m := row.FindStringSubmatch(line)
		require.NotNil(t, m, "a row of the table that is not a code's: %q", line)
		want, ok := errorCodes[m[1]]
		require.True(t, ok, "docs/service.md names the code %q, which errors.go does not declare", m[1])
		require.False(t, seen[m[1]], "%q twice", m[1])
		seen[m[1]] = true
		require.Equal(t, strconv.Itoa(want.http), m[2], "%s: HTTP status", m[1])
		require.Equal(t, want.rpc.String(), m[3], "%s: rpc code", m[1])
		require.Equal(t, strconv.Itoa(int(want.rpc)), m[4], "%s: rpc code number", m[1])
	}
	require.Len(t, seen, len(errorCodes), "docs/service.md's table lacks codes")
}

// TestErrorCodesHaveRPCCode: every row of errorCodes names an rpc code
// (the zero value is none), and rpcStatus gives each error code's answer
// the code's own HTTP status back.
func TestErrorCodesHaveRPCCode(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{RetryAfter: 1}}
	for code, c := range errorCodes {
		require.NotZero(t, c.rpc, "%s has no rpc code", code)
		err := s.rpcRefusal(&requestError{code: code, msg: "m"}, 0)
		require.Equal(t, c.http, rpcStatus(err), code)
	}
}
