package hongbao_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
)

// A storm: many users paying at once, each order reserved, then
// confirmed, cancelled or abandoned (left to expire), while a poller
// reads the campaign's status and requires confirmed + reserved +
// remaining = budget and quota at every read. The clients keep what they
// were told, and the checks compare it with Redis afterwards.

type stormConfig struct {
	users         []string
	ordersPerUser int
	cancelPct     int   // share of reservations cancelled
	abandonPct    int   // share of users whose last reservation is abandoned
	maxOrder      int64 // order amounts are drawn in 1..maxOrder
	workers       int
	seed          uint64
}

// told is what one order's client was told.
type told struct {
	order      string
	orderCents int64
	res        hongbao.Reservation
	final      hongbao.ReservationState // what the client ended with: Confirmed, Cancelled, Expired, Held (abandoned), or 0
}

type stormLog struct {
	mu     sync.Mutex
	orders map[string][]told // by user
	// violations found while it ran (limits seen by a client, status reads)
	violations []string
	reads      atomic.Int64
}

func (l *stormLog) violate(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, a...))
	}
}

// retried counts the calls retry repeated, over the package's tests.
var retried atomic.Int64

// retry runs a discount call until it is answered: a lost reply or a busy
// queue is retried, which the calls' idempotency makes safe.
func retry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := f()
		if retryable(err) && attempt < 50 && ctx.Err() == nil {
			retried.Add(1)
			// A client's backoff: Redis may be restarting.
			time.Sleep(time.Duration(min(attempt+1, 20)) * 5 * time.Millisecond)
			continue
		}
		return v, err
	}
}

// retryable says whether a call may be retried as it is: a lost reply, a
// full queue, or a Redis still loading its data after a restart (the
// script did not run).
func retryable(err error) bool {
	return errors.Is(err, hongbao.ErrOutcomeUnknown) || errors.Is(err, hongbao.ErrBusy) ||
		(err != nil && strings.Contains(err.Error(), "LOADING"))
}

// storm runs cfg against campaign d and returns what the clients were told.
func storm(t *testing.T, eng *hongbao.Engine, d *hongbao.Discount, cfg stormConfig) *stormLog {
	t.Helper()
	ctx := context.Background()
	log := &stormLog{orders: map[string][]told{}}
	stop := make(chan struct{})
	var poll sync.WaitGroup
	poll.Go(func() { pollStatus(ctx, eng, d, log, stop) })
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range cfg.workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(cfg.seed, uint64(w)))
			for i := range next {
				stormUser(ctx, t, eng, d, cfg, r, cfg.users[i], log)
			}
		})
	}
	for i := range cfg.users {
		next <- i
	}
	close(next)
	wg.Wait()
	close(stop)
	poll.Wait()
	require.Empty(t, log.violations)
	require.Positive(t, log.reads.Load(), "the status was read while the storm ran")
	return log
}

// pollStatus reads the status until stop and records every read that
// breaks conservation.
func pollStatus(ctx context.Context, eng *hongbao.Engine, d *hongbao.Discount, log *stormLog, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		st, err := eng.Discounts().Status(ctx, d.ID)
		if retryable(err) {
			continue // Redis is restarting (TestDiscountRedisCrash)
		}
		if err != nil {
			log.violate("status: %v", err)
			return
		}
		log.reads.Add(1)
		if st.ConfirmedCents+st.ReservedCents+st.RemainingCents != d.Budget ||
			st.ConfirmedCount+st.ReservedCount+st.RemainingCount != int64(d.Quota) {
			log.violate("status read: %d+%d+%d cents, %d+%d+%d units", st.ConfirmedCents, st.ReservedCents,
				st.RemainingCents, st.ConfirmedCount, st.ReservedCount, st.RemainingCount)
		}
	}
}

// stormUser plays one user's orders, one after another, and checks after
// each reservation that what the user holds (by what it was told) is
// within the limits.
func stormUser(ctx context.Context, t *testing.T, eng *hongbao.Engine, d *hongbao.Discount, cfg stormConfig, r *rand.Rand, user string, log *stormLog) {
	var mine []told
	abandon := r.IntN(100) < cfg.abandonPct
	for o := range cfg.ordersPerUser {
		tl := told{order: "o" + strconv.Itoa(o), orderCents: 1 + r.Int64N(cfg.maxOrder)}
		res, err := retry(ctx, func() (hongbao.Reservation, error) {
			return eng.Discounts().Reserve(ctx, d.ID, user, tl.order, tl.orderCents)
		})
		if err != nil {
			log.violate("reserve %s %s: %v", user, tl.order, err)
			return
		}
		tl.res = res
		// ReservedAlready: a retry after a lost reply found this
		// client's own reservation.
		if res.Outcome == hongbao.Reserved || res.Outcome == hongbao.ReservedAlready {
			tl.final = hongbao.Held
			mine = append(mine, tl)
			checkHeld(d, user, mine, log)
			last := len(mine) - 1
			switch {
			case abandon && o == cfg.ordersPerUser-1:
				// left to expire
			case r.IntN(100) < cfg.cancelPct:
				mine[last].final = finish(ctx, eng, d.ID, user, tl.order, false, log)
			default:
				mine[last].final = finish(ctx, eng, d.ID, user, tl.order, true, log)
			}
			continue
		}
		mine = append(mine, tl)
	}
	log.mu.Lock()
	log.orders[user] = mine
	log.mu.Unlock()
}

// finish confirms (or cancels) an order and says how it ended.
func finish(ctx context.Context, eng *hongbao.Engine, id, user, order string, confirm bool, log *stormLog) hongbao.ReservationState {
	f := eng.Discounts().Cancel
	if confirm {
		f = eng.Discounts().Confirm
	}
	res, err := retry(ctx, func() (hongbao.Reservation, error) { return f(ctx, id, user, order) })
	switch {
	case err == nil:
		return res.State
	case errors.Is(err, hongbao.ErrReservationExpired):
		return hongbao.Expired // a slow client: its hold ran out first
	}
	log.violate("finish %s %s (confirm %v): %v", user, order, confirm, err)
	return 0
}

// checkHeld requires that what user holds by its answers (held or
// confirmed) is within the limits.
func checkHeld(d *hongbao.Discount, user string, mine []told, log *stormLog) {
	var count, cents int64
	for _, tl := range mine {
		if tl.final == hongbao.Held || tl.final == hongbao.Confirmed {
			count++
			cents += tl.res.Cents
		}
		if tl.res.Cents > tl.orderCents || tl.res.Cents > d.Max {
			log.violate("%s %s: discount %d on an order of %d (max %d)", user, tl.order, tl.res.Cents, tl.orderCents, d.Max)
		}
	}
	if (d.PerUserCount > 0 && count > int64(d.PerUserCount)) || (d.PerUserAmount > 0 && cents > d.PerUserAmount) {
		log.violate("%s holds %d discounts, %d cents (limits %d, %d)", user, count, cents, d.PerUserCount, d.PerUserAmount)
	}
}

// drainHolds reaps until no reservation is held (the abandoned ones
// expire after the hold), within a deadline.
func drainHolds(t *testing.T, eng *hongbao.Engine, id string) *hongbao.DiscountStatus {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := eng.Discounts().Reap(ctx, id)
		require.NoError(t, err)
		st, err := eng.Discounts().Status(ctx, id)
		require.NoError(t, err)
		if st.ReservedCount == 0 {
			return st
		}
		require.True(t, time.Now().Before(deadline), "%d reservations still held", st.ReservedCount)
		time.Sleep(20 * time.Millisecond) // the holds end by the Redis clock
	}
}

// checkStorm compares what the clients were told with Redis, once every
// hold has ended.
func checkStorm(t *testing.T, eng *hongbao.Engine, d *hongbao.Discount, log *stormLog) *hongbao.DiscountStatus {
	t.Helper()
	ctx := context.Background()
	st := drainHolds(t, eng, d.ID)
	a := requireAudit(t, eng, d.ID)
	var count, cents int64
	for user, orders := range log.orders {
		for _, tl := range orders {
			switch tl.final {
			case hongbao.Confirmed:
				count++
				cents += tl.res.Cents
			case hongbao.Held: // abandoned: expired now
				_, err := eng.Discounts().Confirm(ctx, d.ID, user, tl.order)
				require.ErrorIs(t, err, hongbao.ErrReservationExpired)
			}
		}
	}
	require.Equal(t, count, st.ConfirmedCount, "confirmed as the clients were told")
	require.Equal(t, cents, st.ConfirmedCents)
	require.Equal(t, cents, a.ConfirmedCents)
	require.Zero(t, a.OverLimitUsers)
	require.Zero(t, a.OverOrder)
	require.Zero(t, a.OverMax)
	require.Equal(t, d.Budget, st.ConfirmedCents+st.RemainingCents)
	require.Equal(t, int64(d.Quota), st.ConfirmedCount+st.RemainingCount)
	return st
}
