package hongbao_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeExample: every line of the README's library example is a line
// of Example_ledger (comments aside), so the README's code compiles and
// runs as the example does; the two that connect are named in the
// example's comments, since the example connects to the tests' server.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(example), "func Example_ledger() {")
	require.True(t, ok, "example_test.go has Example_ledger")
	body, _, _ = strings.Cut(body, "\n}\n")
	have := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if readme, ok := strings.CutPrefix(line, "// README: "); ok {
			line = readme
		}
		have[code(line)] = true
	}

	_, section, ok := strings.Cut(string(readme), "## Using the library\n\n```go\n")
	require.True(t, ok, "the README's library section opens with a Go block")
	block, _, ok := strings.Cut(section, "```")
	require.True(t, ok)
	lines := 0
	for _, line := range strings.Split(block, "\n") {
		if line = code(line); line == "" {
			continue
		}
		lines++
		require.True(t, have[line], "the README's line %q is not in Example_ledger", line)
	}
	require.GreaterOrEqual(t, lines, 10)
}

// code is a line of Go without its trailing comment and spaces.
func code(line string) string {
	quoted := false
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '"' && (i == 0 || line[i-1] != '\\'):
			quoted = !quoted
		case !quoted && strings.HasPrefix(line[i:], "//"):
			line = line[:i]
		}
	}
	return strings.TrimSpace(line)
}
