package batch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

func g(seq int64, user string, cents int64) ledger.Grant {
	return ledger.Grant{Campaign: "c", Seq: seq, User: user, Cents: cents}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	got, err := Check("c", []ledger.Grant{{Seq: 1, User: "a", Cents: 1}, g(2, "b", 2)})
	require.NoError(t, err)
	require.Equal(t, []ledger.Grant{g(1, "a", 1), g(2, "b", 2)}, got, "an empty campaign means the batch's")
	for _, tc := range []struct {
		name     string
		campaign string
		grant    ledger.Grant
	}{
		{"no campaign", "", g(1, "a", 1)},
		{"other campaign", "c", ledger.Grant{Campaign: "d", Seq: 1, User: "a", Cents: 1}},
		{"no user", "c", g(1, "", 1)},
		{"negative seq", "c", g(-1, "a", 1)},
		{"zero cents", "c", g(1, "a", 0)},
	} {
		_, err := Check(tc.campaign, []ledger.Grant{tc.grant})
		require.ErrorIs(t, err, ledger.ErrInvalid, tc.name)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		batch    []ledger.Grant
		inserted []Row
		stored   []Row // as read after the insert
		want     ledger.ApplyResult
		wantDone []ledger.Grant
		wantErr  bool
	}{
		{
			name:     "all inserted",
			batch:    []ledger.Grant{g(1, "a", 10), g(2, "b", 20)},
			inserted: []Row{{2, "b", 20}, {1, "a", 10}},
			want:     ledger.ApplyResult{Inserted: 2, InsertedCents: 30},
			wantDone: []ledger.Grant{g(1, "a", 10), g(2, "b", 20)},
		},
		{
			name:   "replay and both conflicts",
			batch:  []ledger.Grant{g(1, "a", 10), g(2, "x", 20), g(3, "a", 5), g(4, "b", 1)},
			stored: []Row{{1, "a", 10}, {2, "b", 20}},
			want: ledger.ApplyResult{Replayed: 1, Conflicts: []ledger.Conflict{
				{Grant: g(2, "x", 20), Kind: ledger.PacketTaken, Existing: g(2, "b", 20)},
				{Grant: g(3, "a", 5), Kind: ledger.UserHasOther, Existing: g(1, "a", 10)},
				{Grant: g(4, "b", 1), Kind: ledger.UserHasOther, Existing: g(2, "b", 20)},
			}},
		},
		{
			name:     "identical twice in a batch: insert then replay",
			batch:    []ledger.Grant{g(1, "a", 10), g(1, "a", 10)},
			inserted: []Row{{1, "a", 10}},
			stored:   []Row{{1, "a", 10}},
			want:     ledger.ApplyResult{Inserted: 1, Replayed: 1, InsertedCents: 10},
			wantDone: []ledger.Grant{g(1, "a", 10)},
		},
		{
			name:    "skipped but not found is an error",
			batch:   []ledger.Grant{g(1, "a", 10)},
			wantErr: true,
		},
		{
			name:     "returned but not in the batch is an error",
			batch:    []ledger.Grant{g(1, "a", 10)},
			inserted: []Row{{1, "a", 10}, {2, "b", 1}},
			wantErr:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, done, err := Classify(tc.batch, tc.inserted, tc.stored)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, res)
			require.ElementsMatch(t, tc.wantDone, done)
		})
	}
}

func TestMissing(t *testing.T) {
	t.Parallel()
	batch := []ledger.Grant{g(1, "a", 10), g(1, "a", 10), g(2, "b", 20)}
	seqs, users := Missing(batch, []Row{{1, "a", 10}})
	require.Equal(t, []int64{1, 2}, seqs)
	require.Equal(t, []string{"a", "b"}, users)
	seqs, users = Missing(batch[2:], []Row{{2, "b", 20}})
	require.Nil(t, seqs)
	require.Nil(t, users)
}

func TestHasDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		batch []ledger.Grant
		want  bool
	}{
		{nil, false},
		{[]ledger.Grant{g(1, "a", 1), g(2, "b", 1)}, false},
		{[]ledger.Grant{g(1, "a", 1), g(1, "b", 1)}, true},
		{[]ledger.Grant{g(1, "a", 1), g(2, "a", 1)}, true},
		{[]ledger.Grant{g(1, "a", 1), g(1, "a", 1)}, true},
	} {
		require.Equal(t, tc.want, HasDuplicateKeys(tc.batch), "%v", tc.batch)
	}
}

// TestClassifyInOrder checks the shortcut for a batch inserted whole, in
// order (a COPY, or RETURNING in batch order), against the lookup path:
// the same answer, and a row out of order or missing still takes the
// lookups.
func TestClassifyInOrder(t *testing.T) {
	t.Parallel()
	gs := []ledger.Grant{g(3, "c", 30), g(1, "a", 10), g(2, "b", 20)}
	rows := []Row{RowOf(gs[0]), RowOf(gs[1]), RowOf(gs[2])}
	res, done, err := Classify(gs, rows, nil)
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 3, InsertedCents: 60}, res)
	require.Equal(t, gs, done)
	require.Equal(t, res, AllInserted(gs))

	shuffled := []Row{rows[2], rows[0], rows[1]}
	res2, done2, err := Classify(gs, shuffled, nil)
	require.NoError(t, err)
	require.Equal(t, res, res2, "the same rows in another order")
	require.ElementsMatch(t, gs, done2)

	_, _, err = Classify(gs, rows[:2], nil)
	require.Error(t, err, "a grant neither inserted nor stored")
	_, _, err = Classify(gs, []Row{rows[0], rows[1], {Seq: 2, User: "b", Cents: 21}}, nil)
	require.Error(t, err, "a row not in the batch")
}
