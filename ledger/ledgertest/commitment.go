package ledgertest

import (
	"bytes"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// testCommitment: a commitment is written once after the packets, with
// salts over several chunks read back exactly; a replay with the same root
// is a no-op, another root a conflict that leaves the first; one that
// disagrees with the packets or has no packets is refused; racing writers
// of two roots leave exactly one; DrawRows joins packets and grants.
func testCommitment(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cm, ok := l.(ledger.Committer)
	require.True(t, ok, "%T is not a ledger.Committer", l)
	const id = "commit-1"
	n := ledger.SaltsPerChunk*2 + 7
	cents := make([]int64, n)
	var total int64
	for i := range cents {
		cents[i] = int64(i%5 + 1)
		total += cents[i]
	}
	salts := make([]byte, ledger.SaltSize*n)
	_, _ = rand.Read(salts)
	c := ledger.Commitment{Campaign: id, Count: int64(n), Cents: total, Body: []byte(`{"root":"x"}`), HolderKey: bytes.Repeat([]byte{7}, 32)}
	c.Root[0] = 1

	_, err := cm.Commitment(ctx, id)
	require.ErrorIs(t, err, ledger.ErrNoCommitment)
	require.ErrorIs(t, cm.WriteCommitment(ctx, c, salts), ledger.ErrNoPackets)
	require.NoError(t, l.WritePackets(ctx, id, cents))
	require.ErrorIs(t, cm.WriteCommitment(ctx, c, salts[:len(salts)-32]), ledger.ErrInvalid)
	wrong := c
	wrong.Cents++
	require.ErrorIs(t, cm.WriteCommitment(ctx, wrong, salts), ledger.ErrConflict)

	require.NoError(t, cm.WriteCommitment(ctx, c, salts))
	require.NoError(t, cm.WriteCommitment(ctx, c, salts), "a replay")
	other := c
	other.Root[0] = 2
	var ce *ledger.ConflictError
	require.ErrorAs(t, cm.WriteCommitment(ctx, other, salts), &ce)
	require.Equal(t, "commitment", ce.Entry)

	got, err := open(t).(ledger.Committer).Commitment(ctx, id)
	require.NoError(t, err)
	require.Equal(t, c, got)
	s, err := cm.Salts(ctx, id)
	require.NoError(t, err)
	require.Equal(t, salts, s)

	// Grants show in the draw rows, in seq order.
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "f", Total: total}))
	_, err = l.ApplyGrants(ctx, id, []ledger.Grant{{Campaign: id, Seq: 3, User: "u3", Cents: cents[2]}})
	require.NoError(t, err)
	var rows []ledger.DrawRow
	require.NoError(t, cm.DrawRows(ctx, id, func(r ledger.DrawRow) error { rows = append(rows, r); return nil }))
	require.Len(t, rows, n)
	for i, r := range rows {
		require.EqualValues(t, i+1, r.Seq)
		require.Equal(t, cents[i], r.Cents)
		if r.Seq == 3 {
			require.Equal(t, "u3", r.User)
			require.False(t, r.SettledAt.IsZero())
		} else {
			require.Empty(t, r.User)
			require.True(t, r.SettledAt.IsZero())
		}
	}
	require.ErrorIs(t, cm.DrawRows(ctx, "none", func(ledger.DrawRow) error { return nil }), ledger.ErrNoPackets)

	// Two creates racing with two roots: one stands, the other conflicts.
	const race = "commit-race"
	require.NoError(t, l.WritePackets(ctx, race, []int64{5, 6}))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc := ledger.Commitment{Campaign: race, Count: 2, Cents: 11, Body: []byte("{}"), HolderKey: make([]byte, 32)}
			rc.Root[0] = byte(i + 1)
			errs[i] = open(t).(ledger.Committer).WriteCommitment(ctx, rc, make([]byte, 64))
		}()
	}
	wg.Wait()
	require.True(t, (errs[0] == nil) != (errs[1] == nil), "%v", errs)
}
