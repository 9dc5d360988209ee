package leader_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/leader"
)

// syncBuffer is a log both the electors and the test use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHolderNamesTheHolder: Holder reads nobody before an election, then
// the holder's ID, token and time left, from any Elector of the lease;
// the process that waits for it logs once whom it waits for; a stale note
// (of an earlier holding) names nobody; after the holder stops, nobody.
func TestHolderNamesTheHolder(t *testing.T) {
	t.Parallel()
	c := testenv.SharedRedis(t).Client
	name := testenv.UniqueID(t)
	ctx := context.Background()
	var waiterLog syncBuffer
	cfg := func(id string, log *slog.Logger) leader.Config {
		return leader.Config{Redis: c, Name: name, TTL: time.Minute, RenewEvery: 20 * time.Millisecond, ID: id, Logger: log}
	}
	watcher, err := leader.New(cfg("watcher", quiet()))
	require.NoError(t, err)
	h, err := watcher.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, leader.Holder{}, h, "nobody holds it yet")

	first := start(t, cfg("first-process", quiet()))
	eventually(t, 5*time.Second, "first elected", first.IsLeader)
	eventually(t, 5*time.Second, "its note", func() bool {
		h, err = watcher.Holder(ctx)
		require.NoError(t, err)
		return h.ID == "first-process"
	})
	require.Positive(t, h.Token)
	require.Greater(t, h.TTL, 50*time.Second)
	require.LessOrEqual(t, h.TTL, time.Minute)

	second := start(t, cfg("second-process", slog.New(slog.NewTextHandler(&waiterLog, nil))))
	eventually(t, 5*time.Second, "the waiter's log line", func() bool {
		return bytes.Contains([]byte(waiterLog.String()), []byte("waiting for the lease"))
	})
	line := waiterLog.String()
	require.Contains(t, line, "holder=first-process")
	require.Contains(t, line, "holder_token="+strconv.FormatInt(h.Token, 10))
	require.Contains(t, line, "self=second-process")
	require.False(t, second.IsLeader())

	// A note of another holding names nobody.
	note := leader.DefaultPrefix + "{" + name + "}:holder"
	require.NoError(t, c.Do(ctx, c.B().Set().Key(note).Value("999999 impostor").Build()).Error())
	h2, err := watcher.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, h.Token, h2.Token)
	require.Empty(t, h2.ID)

	first.Stop()
	eventually(t, 5*time.Second, "the second elected", second.IsLeader)
	eventually(t, 5*time.Second, "the second's note", func() bool {
		h, err = watcher.Holder(ctx)
		require.NoError(t, err)
		return h.ID == "second-process"
	})
	require.Equal(t, 1, bytes.Count([]byte(waiterLog.String()), []byte("waiting for the lease")), "said once per holding")
	second.Stop()
	h, err = watcher.Holder(ctx)
	require.NoError(t, err)
	require.Equal(t, leader.Holder{}, h)
}
