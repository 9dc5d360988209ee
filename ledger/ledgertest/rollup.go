package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// testRollUp: a user's Balance is the sum of their grants and discounts
// before the refunds, between a refund and its roll-up, and after; a
// roll-up of a live campaign does nothing, of a refunded one moves the
// balances once, and replays after it move nothing.
func testRollUp(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "c1", 1000)
	fund(t, l, "c2", 1000)
	fund(t, l, dc, 1000)
	c1 := []ledger.Grant{g("c1", 1, "a", 100), g("c1", 2, "b", 200)}
	c2 := []ledger.Grant{g("c2", 1, "a", 30), g("c2", 2, "c", 40)}
	ds := []ledger.Discount{dsc("a", "o1", 1, 5), dsc("a", "o2", 2, 6), dsc("b", "o1", 3, 7)}
	want := map[string]int64{"user:a": 141, "user:b": 207, "user:c": 40, "user:d": 0}
	accounts := []string{"user:a", "user:b", "user:c", "user:d"}
	replayAll := func() {
		t.Helper()
		r1, err := l.ApplyGrants(ctx, "c1", c1)
		require.NoError(t, err)
		require.Equal(t, ledger.ApplyResult{Replayed: 2}, r1)
		r2, err := l.ApplyGrants(ctx, "c2", c2)
		require.NoError(t, err)
		require.Equal(t, ledger.ApplyResult{Replayed: 2}, r2)
		r3, err := l.ApplyDiscounts(ctx, dc, ds)
		require.NoError(t, err)
		require.Equal(t, ledger.DiscountResult{Replayed: 3}, r3)
	}
	rollUp := func(id string, want bool) {
		t.Helper()
		done, err := l.RollUp(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, done, "roll-up of %s", id)
	}
	pending := func(want ...string) {
		t.Helper()
		ids, err := l.PendingRollUps(ctx, 10)
		require.NoError(t, err)
		require.ElementsMatch(t, want, ids)
	}
	apply(t, l, "c1", c1...)
	apply(t, l, "c2", c2...)
	applyDiscounts(t, l, ds...)
	require.Equal(t, want, balances(t, l, accounts...), "before any refund")
	pending()
	rollUp("c1", false) // live: a grant could still come
	rollUp(dc, false)
	require.Equal(t, want, balances(t, l, accounts...), "after roll-ups of live campaigns")
	apply(t, l, "c1", g("c1", 3, "d", 1))
	want["user:d"] = 1
	replayAll()
	require.NoError(t, l.Refund(ctx, "c1", 699))
	pending("c1")
	require.Equal(t, want, balances(t, l, accounts...), "c1 refunded, not rolled up")
	rollUp("c1", true)
	pending()
	require.Equal(t, want, balances(t, l, accounts...), "c1 rolled up")
	rollUp("c1", false)
	require.Equal(t, want, balances(t, l, accounts...), "c1 rolled up again")
	replayAll()
	require.Equal(t, want, balances(t, l, accounts...), "replays after the roll-up")
	require.NoError(t, l.Refund(ctx, dc, 982))
	require.NoError(t, l.Refund(ctx, "c2", 930))
	require.NoError(t, l.Refund(ctx, "c2", 930), "a replayed refund")
	pending(dc, "c2")
	ids, err := l.PendingRollUps(ctx, 1)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	require.Equal(t, want, balances(t, l, accounts...), "refunded, not rolled up")
	rollUp("c2", true)
	require.Equal(t, want, balances(t, l, accounts...), "c2 rolled up")
	rollUp(dc, true)
	pending()
	replayAll()
	require.Equal(t, want, balances(t, l, accounts...), "all rolled up")
	require.Equal(t, map[string]int64{"escrow:c1": 0, "escrow:c2": 0, "escrow:" + dc: 0, "funding:ops": -3000 + 699 + 982 + 930},
		balances(t, l, "escrow:c1", "escrow:c2", "escrow:"+dc, "funding:ops"))

	_, err = l.RollUp(ctx, "nope")
	require.ErrorIs(t, err, ledger.ErrNotFunded)
	_, err = l.RollUp(ctx, "")
	require.ErrorIs(t, err, ledger.ErrInvalid)
	_, err = l.PendingRollUps(ctx, 0)
	require.ErrorIs(t, err, ledger.ErrInvalid)
}

// testRollUpRacing: several roll-ups of one refunded campaign race, each
// through its own Ledger, while readers read balances: exactly one moves
// the balances, and every read, before, during and after, answers each
// user's entries to the cent (a read that saw the journal and the stored
// balance both, or neither, would be off by the user's grant).
func testRollUpRacing(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const users = 300
	// Two campaigns per user: "r" is rolled up under the race, "o" stays
	// live, so a balance mixes a stored part and a journal part.
	want := make(map[string]int64, users)
	var gr, go_ []ledger.Grant
	var totalR int64
	for i := range users {
		u := fmt.Sprintf("u%03d", i)
		gr = append(gr, g("r", int64(i+1), u, int64(1+i%7)))
		go_ = append(go_, g("o", int64(i+1), u, 100))
		totalR += int64(1 + i%7)
		want[ledger.UserAccount(u)] = int64(1+i%7) + 100
	}
	fund(t, l, "r", totalR+5)
	fund(t, l, "o", 100*users)
	apply(t, l, "r", gr...)
	apply(t, l, "o", go_...)
	require.NoError(t, l.Refund(ctx, "r", 5))

	rollers := []ledger.Ledger{open(t), open(t), open(t)}
	readers := []ledger.Ledger{open(t), open(t)}
	start, stop := make(chan struct{}), make(chan struct{})
	readsDone := readBalances(readers, want, start, stop)
	dones := make([]bool, len(rollers))
	rollErrs := make([]error, len(rollers))
	var rw sync.WaitGroup
	for i, r := range rollers {
		rw.Add(1)
		go func() {
			defer rw.Done()
			<-start
			dones[i], rollErrs[i] = r.RollUp(ctx, "r")
		}()
	}
	close(start)
	rw.Wait()
	close(stop)
	require.NoError(t, errors.Join(rollErrs...))
	require.NoError(t, <-readsDone)
	moved := 0
	for _, d := range dones {
		if d {
			moved++
		}
	}
	require.Equal(t, 1, moved, "roll-ups that moved the balances: %v", dones)
	accounts := make([]string, 0, users)
	for u := range want {
		accounts = append(accounts, u)
	}
	require.Equal(t, want, balances(t, l, accounts...), "after the race")
	ids, err := l.PendingRollUps(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, ids)
}

// readBalances has each reader read the balances of want's users, one
// after another, from start until stop (at least one read each), and
// sends, once all are done, the first read that differed from want.
func readBalances(readers []ledger.Ledger, want map[string]int64, start, stop <-chan struct{}) <-chan error {
	users := make([]string, 0, len(want))
	for u := range want {
		users = append(users, u)
	}
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := 0; ; n++ {
				select {
				case <-stop:
					if n > 0 {
						return
					}
				default:
				}
				u := users[(n*7+i)%len(users)]
				b, err := r.Balance(ctx, u)
				if err == nil && b != want[u] {
					err = fmt.Errorf("read %d: %s has %d, want %d", n, u, b, want[u])
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	return done
}
