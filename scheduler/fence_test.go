package scheduler_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

// raiseLog is a ledger that notes every RaiseLease and whether a batch of
// grants came while the last raise was refused (or before any).
type raiseLog struct {
	ledger.Ledger
	mu       sync.Mutex
	proven   bool
	refused  []int64
	accepted []int64
	unproven int // ApplyGrants calls while not proven
}

func (r *raiseLog) RaiseLease(ctx context.Context, lease string, token int64) error {
	err := r.Ledger.RaiseLease(ctx, lease, token)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proven = err == nil
	if err == nil {
		r.accepted = append(r.accepted, token)
	} else {
		r.refused = append(r.refused, token)
	}
	return err
}

func (r *raiseLog) ApplyGrants(ctx context.Context, c string, gs []ledger.Grant) (ledger.ApplyResult, error) {
	r.mu.Lock()
	if !r.proven {
		r.unproven++
	}
	r.mu.Unlock()
	return r.Ledger.ApplyGrants(ctx, c, gs)
}

func (r *raiseLog) state() (refused, accepted []int64, unproven int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.refused...), append([]int64(nil), r.accepted...), r.unproven
}

// lockedBuffer is a log the scheduler writes and the test reads.
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

// redisMicros reads the Redis clock in microseconds since the epoch.
func redisMicros(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	now, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return now[0]*1_000_000 + now[1]
}

// TestSchedulerRefusesStaleToken: the ledger records a token for the
// scheduler's lease above any the Redis clock gives now (as after a
// counter lost in Redis with a clock behind). The first election's token
// is refused: that holder settles nothing and logs why; it takes the
// lease again above the record, and settles everything under that token,
// which the ledger now records.
func TestSchedulerRefusesStaleToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const lease = "hb:lease:{scheduler}"
	forced := redisMicros(t, f.redis.Client) + int64(time.Hour/time.Microsecond)
	require.NoError(t, f.led.RaiseLease(ctx, lease, forced))

	c, err := f.eng.Create(ctx, hongbao.Spec{Total: 1000, Count: 10})
	require.NoError(t, err)
	for i := range 6 {
		_, err := f.eng.Grab(ctx, c.ID, "u"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	led := &raiseLog{Ledger: f.led}
	var logs lockedBuffer
	s, err := scheduler.New(scheduler.Config{Engine: f.eng, LeaseTTL: time.Second,
		Settle: settle.Config{Redis: f.redis.Client, Ledger: led, Consumer: "test"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)

	waitFor(t, "the grants settled", 10*time.Second, func() bool {
		tot, err := f.led.Totals(ctx, c.ID)
		return err == nil && tot.GrantCount == 6
	})
	refused, accepted, unproven := led.state()
	require.NotEmpty(t, refused, "the first token was refused")
	for _, tok := range refused {
		require.LessOrEqual(t, tok, forced)
	}
	require.Equal(t, []int64{forced + 1}, accepted, "taken again just above the record")
	require.Zero(t, unproven, "nothing settled under a refused token")
	rec, err := f.led.LeaseToken(ctx, lease)
	require.NoError(t, err)
	require.Equal(t, forced+1, rec)
	require.Contains(t, logs.String(), "level=ERROR msg=\"REFUSED: the fencing token is not above the one recorded")
	require.Contains(t, logs.String(), fmt.Sprintf("recorded=%d", forced))
	require.True(t, s.IsLeader())
}

// TestPartsRecordTheirTokens: with parts, each part's lease records its
// own token in the ledger, the token its holder settles under.
func TestPartsRecordTheirTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	s := f.startParts(t, f.redis.Client, "p", 2)
	balanced(t, 2, s)
	for k := range 2 {
		lease := "hb:lease:{scheduler:part:" + strconv.Itoa(k) + "}"
		rec, err := f.led.LeaseToken(ctx, lease)
		require.NoError(t, err)
		h, err := f.redis.Client.Do(ctx, f.redis.Client.B().Get().Key(lease+":mark").Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "c:"+strconv.FormatInt(rec, 10), h, "part %d", k)
	}
}
