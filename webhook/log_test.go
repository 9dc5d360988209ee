package webhook

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockedBuffer is a buffer a logger and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRetriesAreLogged: each failed attempt that is retried is a warning
// of Config.Logger, with the attempt's number and its cause; the attempt
// that succeeds says nothing.
func TestRetriesAreLogged(t *testing.T) {
	t.Parallel()
	h := newHost(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			http.Error(w, "later", http.StatusServiceUnavailable)
		}
	})
	var buf lockedBuffer
	s := newSink(t, h.srv.URL, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	recordWaits(s)
	_, err := s.ApplyGrants(t.Context(), "c1", testGrants())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	for i, l := range lines {
		require.Contains(t, l, "level=WARN")
		require.Contains(t, l, `msg="webhook: attempt failed; retrying"`)
		require.Contains(t, l, "event=grants")
		require.Contains(t, l, "attempt="+string(rune('1'+i)))
		require.Contains(t, l, "503")
	}
}
