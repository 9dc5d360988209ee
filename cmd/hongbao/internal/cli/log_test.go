package cli

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLogDurations: a command's logs are on stderr, and durations read as
// text in both formats, in groups too: JSON's default would be
// nanoseconds.
func TestLogDurations(t *testing.T) {
	t.Parallel()
	for format, want := range map[string][]string{
		"json": {`"took":"1.5s"`, `"lease":{"ttl":"250ms"}`},
		"text": {`took=1.5s`, `lease.ttl=250ms`},
	} {
		var out, errb bytes.Buffer
		env := &IO{Stdout: &out, Stderr: &errb}
		newLogger(env, format).Info("done", "took", 1500*time.Millisecond, slog.Group("lease", "ttl", 250*time.Millisecond))
		for _, w := range want {
			require.Contains(t, errb.String(), w, format)
		}
		require.Empty(t, out.String(), "logs go to stderr")
	}
	var errb bytes.Buffer
	demoLogger(&IO{Stderr: &errb}, "json").Info("not shown")
	require.Empty(t, errb.String(), "a demo logs warnings and worse")
}
