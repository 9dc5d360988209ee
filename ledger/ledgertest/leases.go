package ledgertest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// requireStale checks a refused raise: a *StaleLeaseError naming the
// lease, the token and the token recorded.
func requireStale(t *testing.T, err error, lease string, token, recorded int64) {
	t.Helper()
	require.ErrorIs(t, err, ledger.ErrStaleLease)
	var se *ledger.StaleLeaseError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, ledger.StaleLeaseError{Lease: lease, Token: token, Recorded: recorded}, *se)
}

func leaseToken(t *testing.T, l ledger.Ledger, lease string) int64 {
	t.Helper()
	token, err := l.LeaseToken(ctx, lease)
	require.NoError(t, err)
	return token
}

// testLeases: a lease's token is recorded when it is above the one
// recorded (or none is), and only then: an equal or lower token is a
// *StaleLeaseError with the recorded one and changes nothing, a retry of
// an accepted raise too. Leases are independent, the record outlives the
// connection (another Ledger of the database reads it), tokens up to
// MaxInt64 are kept exactly, and what can never be recorded is
// ErrInvalid.
func testLeases(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const a, b = "hb:lease:{scheduler}", "hb:lease:{scheduler:part:1}"
	require.Zero(t, leaseToken(t, l, a), "none recorded")
	require.NoError(t, l.RaiseLease(ctx, a, 1_790_000_000_000_000))
	require.Equal(t, int64(1_790_000_000_000_000), leaseToken(t, l, a))
	requireStale(t, l.RaiseLease(ctx, a, 1_790_000_000_000_000), a, 1_790_000_000_000_000, 1_790_000_000_000_000)
	requireStale(t, l.RaiseLease(ctx, a, 4), a, 4, 1_790_000_000_000_000)
	require.NoError(t, l.RaiseLease(ctx, a, 1_790_000_000_000_001))
	require.Equal(t, int64(1_790_000_000_000_001), leaseToken(t, l, a))

	require.Zero(t, leaseToken(t, l, b), "another lease has its own")
	require.NoError(t, l.RaiseLease(ctx, b, 7), "below another lease's token")
	require.Equal(t, int64(7), leaseToken(t, l, b))

	other := open(t)
	require.Equal(t, int64(1_790_000_000_000_001), leaseToken(t, other, a), "durable, for every process")
	requireStale(t, other.RaiseLease(ctx, a, 1_790_000_000_000_000), a, 1_790_000_000_000_000, 1_790_000_000_000_001)
	const top = 1<<63 - 1
	require.NoError(t, other.RaiseLease(ctx, b, top))
	require.Equal(t, int64(top), leaseToken(t, l, b))

	for _, bad := range []struct {
		lease string
		token int64
	}{{"", 5}, {"x\x00y", 5}, {"\xff", 5}, {a, 0}, {a, -1}} {
		require.ErrorIs(t, l.RaiseLease(ctx, bad.lease, bad.token), ledger.ErrInvalid, "%q %d", bad.lease, bad.token)
	}
	require.Equal(t, int64(1_790_000_000_000_001), leaseToken(t, l, a), "refusals change nothing")
}

// testLeasesRacing: many raises of one lease at once, from two Ledgers of
// the database: the record ends at the largest token, which was taken,
// and every other raise is either taken or refused with a recorded token
// at least its own.
func testLeasesRacing(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	ls := []ledger.Ledger{open(t), open(t)}
	const lease, n = "hb:lease:{race}", 64
	var mu sync.Mutex
	var taken []int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		token := int64(1 + (i*37)%n) // every token once, out of order
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ls[i%2].RaiseLease(ctx, lease, token)
			var se *ledger.StaleLeaseError
			switch {
			case err == nil:
				mu.Lock()
				taken = append(taken, token)
				mu.Unlock()
			case errors.As(err, &se) && se.Recorded >= token:
			default:
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, int64(n), leaseToken(t, ls[0], lease))
	require.Contains(t, taken, int64(n), "the largest is always taken")
}
