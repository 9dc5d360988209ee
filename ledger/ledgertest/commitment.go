package ledgertest

import (
	"bytes"
	"crypto/rand"
	"sync"
	"testing"
	"time"

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

	testGrantTimes(t, l, cm, id, cents, total)

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

// testPurgeDrawData: the retention sweep purges the salts and the holder
// key of refunded campaigns whose refund is older than its bound, once,
// and only those: the commitment (root, body) stays readable, its salts
// answer ErrDrawDataPurged, the packets and grants stay; a second sweep
// finds nothing; a campaign not refunded, or refunded after the bound,
// keeps its data.
func testPurgeDrawData(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cm := l.(ledger.Committer)
	commit := func(id string, refund bool) ledger.Commitment {
		cents := []int64{30, 70}
		require.NoError(t, l.WritePackets(ctx, id, cents))
		c := ledger.Commitment{Campaign: id, Count: 2, Cents: 100, Body: []byte(`{"campaign_id":"` + id + `"}`), HolderKey: bytes.Repeat([]byte{9}, 32)}
		c.Root[0] = 7
		require.NoError(t, cm.WriteCommitment(ctx, c, bytes.Repeat([]byte{1}, 64)))
		require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "f", Total: 100}))
		_, err := l.ApplyGrants(ctx, id, []ledger.Grant{{Campaign: id, Seq: 2, User: "u", Cents: 70, GrantedAt: 1_790_000_000_000}})
		require.NoError(t, err)
		if refund {
			require.NoError(t, l.Refund(ctx, id, 30))
		}
		return c
	}
	old := commit("purge-old", true)
	commit("purge-open", false)

	_, err := cm.PurgeDrawData(ctx, time.Now(), 0)
	require.ErrorIs(t, err, ledger.ErrInvalid)
	ids, err := cm.PurgeDrawData(ctx, time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, ids, "refunded after the bound: kept")

	ids, err = cm.PurgeDrawData(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"purge-old"}, ids)
	ids, err = cm.PurgeDrawData(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, ids, "a second sweep purges nothing")

	got, err := cm.Commitment(ctx, "purge-old")
	require.NoError(t, err)
	require.Equal(t, old.Root, got.Root)
	require.Equal(t, old.Body, got.Body)
	require.Nil(t, got.HolderKey)
	require.False(t, got.PurgedAt.IsZero())
	_, err = cm.Salts(ctx, "purge-old")
	require.ErrorIs(t, err, ledger.ErrDrawDataPurged)
	user, at, err := cm.GrantTime(ctx, "purge-old", 2)
	require.NoError(t, err, "the grants are ledger entries: they stay")
	require.Equal(t, "u", user)
	require.Equal(t, time.UnixMilli(1_790_000_000_000).UTC(), at)
	n := 0
	require.NoError(t, l.Packets(ctx, "purge-old", func(ledger.Packet) error { n++; return nil }))
	require.Equal(t, 2, n)

	kept, err := cm.Commitment(ctx, "purge-open")
	require.NoError(t, err)
	require.True(t, kept.PurgedAt.IsZero())
	require.Len(t, kept.HolderKey, 32)
	s, err := cm.Salts(ctx, "purge-open")
	require.NoError(t, err)
	require.Len(t, s, 64)
}

// testGrantTimes: grants show in the draw rows, in seq order, with the time
// Redis granted them when the grant carries it (NULL, zero, when not); a
// replay with another time keeps the first.
func testGrantTimes(t *testing.T, l ledger.Ledger, cm ledger.Committer, id string, cents []int64, total int64) {
	n := len(cents)
	var err error
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: id, Funding: "f", Total: total}))
	const at3 = int64(1_790_000_000_123)
	_, err = l.ApplyGrants(ctx, id, []ledger.Grant{{Campaign: id, Seq: 3, User: "u3", Cents: cents[2], GrantedAt: at3},
		{Campaign: id, Seq: 4, User: "u4", Cents: cents[3]}})
	require.NoError(t, err)
	res, err := l.ApplyGrants(ctx, id, []ledger.Grant{{Campaign: id, Seq: 3, User: "u3", Cents: cents[2], GrantedAt: at3 + 5}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Replayed)
	user, at, err := cm.GrantTime(ctx, id, 3)
	require.NoError(t, err)
	require.Equal(t, "u3", user)
	require.Equal(t, time.UnixMilli(at3).UTC(), at)
	user, at, err = cm.GrantTime(ctx, id, 4)
	require.NoError(t, err)
	require.Equal(t, "u4", user)
	require.True(t, at.IsZero(), "a grant without its time: %v", at)
	_, _, err = cm.GrantTime(ctx, id, 5)
	require.ErrorIs(t, err, ledger.ErrNoGrant)
	_, _, err = cm.GrantTime(ctx, "none", 1)
	require.ErrorIs(t, err, ledger.ErrNoGrant)
	var rows []ledger.DrawRow
	require.NoError(t, cm.DrawRows(ctx, id, func(r ledger.DrawRow) error { rows = append(rows, r); return nil }))
	require.Len(t, rows, n)
	for i, r := range rows {
		require.EqualValues(t, i+1, r.Seq)
		require.Equal(t, cents[i], r.Cents)
		switch r.Seq {
		case 3:
			require.Equal(t, "u3", r.User)
			require.Equal(t, time.UnixMilli(at3).UTC(), r.GrantedAt)
		case 4:
			require.Equal(t, "u4", r.User)
			require.True(t, r.GrantedAt.IsZero())
		default:
			require.Empty(t, r.User)
			require.True(t, r.GrantedAt.IsZero())
		}
	}
	require.ErrorIs(t, cm.DrawRows(ctx, "none", func(ledger.DrawRow) error { return nil }), ledger.ErrNoPackets)

}
