package hongbao_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
)

// TestFairness: a create commits before it answers, on one shard and on
// three; a create of the same id run again keeps the commitment; every
// holder's proof verifies with tlog against the committed root; the draw
// log is refused while the campaign is open and rebuilds the root once it
// closed; a ledger edited after create fails CheckCommitment.
func TestFairness(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l := sqliteLedger(t)
			r := testenv.SharedRedis(t)
			eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, Logger: quiet()})
			require.NoError(t, err)
			const count = 41
			spec := hongbao.Spec{ID: testenv.UniqueID(t), Total: count * 25, Count: count, Shards: shards, OpensAt: time.Now().Add(time.Hour)}
			c := create(t, eng, spec)
			body, err := eng.Commitment(ctx, c.ID)
			require.NoError(t, err)
			var pub fairness.Commitment
			require.NoError(t, json.Unmarshal(body, &pub))
			require.Equal(t, fairness.Scheme, pub.Scheme)
			require.EqualValues(t, count, pub.Count)
			require.EqualValues(t, count*25, pub.TotalCents)

			// Created again: the same commitment, byte for byte.
			_, err = eng.Create(ctx, spec)
			require.ErrorIs(t, err, hongbao.ErrCampaignExists)
			again, err := eng.Commitment(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, body, again)

			// Open it now and grab everything.
			spec.ID, spec.OpensAt = testenv.UniqueID(t), time.Time{}
			c = create(t, eng, spec)
			body, err = eng.Commitment(ctx, c.ID)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(body, &pub))
			root, err := fairness.ParseHash(pub.Root)
			require.NoError(t, err)
			_, err = eng.Proof(ctx, c.ID, "nobody")
			require.ErrorIs(t, err, hongbao.ErrNoGrant)
			var draw bytes.Buffer
			require.ErrorIs(t, eng.DrawLog(ctx, c.ID, 0, time.Now(), &draw), hongbao.ErrNotClosed)
			for i := range count {
				user := "u" + strconv.Itoa(i)
				g, err := eng.Grab(ctx, c.ID, user)
				require.NoError(t, err)
				require.Equal(t, hongbao.Granted, g.Outcome)
				p, err := eng.Proof(ctx, c.ID, user)
				require.NoError(t, err)
				require.Equal(t, g.Seq, p.Seq)
				require.Equal(t, g.Cents, p.Cents)
				require.Equal(t, pub.Root, p.Root)
				checkWithTlog(t, c.ID, p, root)
			}
			_, err = eng.CloseCampaign(ctx, c.ID)
			require.NoError(t, err)
			require.NoError(t, eng.DrawLog(ctx, c.ID, 0, time.Now(), &draw))
			res, err := fairness.VerifyDrawLog(bytes.NewReader(draw.Bytes()), pub)
			require.NoError(t, err)
			require.EqualValues(t, count, res.Count)
			require.NoError(t, eng.CheckCommitment(ctx, c.ID))
		})
	}
}

// checkWithTlog checks a proof with golang.org/x/mod/sumdb/tlog.
func checkWithTlog(t *testing.T, campaign string, p fairness.Proof, root fairness.Hash) {
	t.Helper()
	salt, err := hex.DecodeString(p.Salt)
	require.NoError(t, err)
	proof := make(tlog.RecordProof, len(p.Path))
	for i, s := range p.Path {
		h, err := fairness.ParseHash(s)
		require.NoError(t, err)
		proof[i] = tlog.Hash(h)
	}
	leaf := tlog.RecordHash(fairness.Leaf(campaign, p.Seq, p.Cents, salt))
	require.NoError(t, tlog.CheckRecord(proof, p.TreeSize, tlog.Hash(root), p.LeafIndex, leaf))
}

// TestCommitmentKeptByRetry: a create that recorded its packets and its
// commitment and died before going live is run again: the retry keeps
// the commitment it finds (same salts, same root); other packets under
// the id are refused.
func TestCommitmentKeptByRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := sqliteLedger(t)
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: l, Logger: quiet()})
	require.NoError(t, err)
	id := testenv.UniqueID(t)
	seed := uint64(42)
	spec := hongbao.Spec{ID: id, Total: 1000, Count: 10, Seed: &seed}
	// The first attempt's steps up to the commitment, as the engine does
	// them, then nothing: the campaign never went live.
	c := create(t, eng, hongbao.Spec{ID: testenv.UniqueID(t), Total: 1000, Count: 10, Seed: &seed})
	cents := make([]int64, 0, 10)
	require.NoError(t, l.Packets(ctx, c.ID, func(p ledger.Packet) error { cents = append(cents, p.Cents); return nil }))
	require.NoError(t, l.WritePackets(ctx, id, cents))
	salts, err := fairness.NewSalts(10)
	require.NoError(t, err)
	pub, err := fairness.Commit(id, cents, salts, 1, 1000, time.Now())
	require.NoError(t, err)
	body, _ := json.Marshal(pub)
	rec := ledger.Commitment{Campaign: id, Count: 10, Cents: 1000, Body: body, HolderKey: make([]byte, 32)}
	h, _ := fairness.ParseHash(pub.Root)
	rec.Root = h
	require.NoError(t, l.(ledger.Committer).WriteCommitment(ctx, rec, salts))

	create(t, eng, spec)
	got, err := eng.Commitment(ctx, id)
	require.NoError(t, err)
	require.Equal(t, body, got, "the retry kept the first attempt's commitment")
	require.NoError(t, eng.CheckCommitment(ctx, id))
}

// gatedLedger holds every Packets read while gate is armed, until release
// is closed, and counts them: a proof tree's build reads the packets
// once.
type gatedLedger struct {
	ledger.Ledger
	ledger.Committer
	armed   atomic.Bool
	reads   atomic.Int64
	release chan struct{}
}

func (g *gatedLedger) Packets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	if g.armed.Load() {
		g.reads.Add(1)
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Ledger.Packets(ctx, campaign, fn)
}

// TestProofTreeBuiltOnce: the first proofs of a campaign, asked at once,
// share one build of its tree; a caller that gives up while it runs gets
// its own cancellation, and the build goes on for the others; builds of
// several campaigns run at most two at a time, the others wait; a built
// tree is kept, and later proofs read nothing.
func TestProofTreeBuiltOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := sqliteLedger(t)
	gl := &gatedLedger{Ledger: l, Committer: l.(ledger.Committer), release: make(chan struct{})}
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client, Packets: gl, Logger: quiet()})
	require.NoError(t, err)
	var ids []string
	for range 3 {
		c := create(t, eng, hongbao.Spec{ID: testenv.UniqueID(t), Total: 5000, Count: 50})
		ids = append(ids, c.ID)
		for _, u := range []string{"a", "b", "c"} {
			g, err := eng.Grab(ctx, c.ID, u)
			require.NoError(t, err)
			require.Equal(t, hongbao.Granted, g.Outcome)
		}
	}
	gl.armed.Store(true)

	type answer struct {
		p   fairness.Proof
		err error
	}
	quitter, quit := context.WithCancel(ctx)
	answers := make([]chan answer, 5)
	ask := func(i int, ctx context.Context, id, user string) {
		answers[i] = make(chan answer, 1)
		go func() {
			p, err := eng.Proof(ctx, id, user)
			answers[i] <- answer{p, err}
		}()
	}
	// The caller that will give up asks first: the build is its call's.
	ask(0, quitter, ids[0], "a")
	waitCond(t, "the first build running", func() bool {
		building, _ := hongbao.TreeBuilds(eng)
		return building == 1
	})
	ask(1, ctx, ids[0], "b")
	ask(2, ctx, ids[0], "c")
	ask(3, ctx, ids[1], "a")
	ask(4, ctx, ids[2], "a")
	waitCond(t, "two builds running and one waiting", func() bool {
		building, waiting := hongbao.TreeBuilds(eng)
		return building == 2 && waiting == 1
	})
	quit()
	a := <-answers[0]
	require.ErrorIs(t, a.err, context.Canceled, "the caller that gave up")
	building, _ := hongbao.TreeBuilds(eng)
	require.EqualValues(t, 2, building, "its build goes on, for the others")

	close(gl.release)
	for i, id := range []string{ids[0], ids[0], ids[1], ids[2]} {
		a := <-answers[i+1]
		require.NoError(t, a.err)
		body, err := eng.Commitment(ctx, id)
		require.NoError(t, err)
		var pub fairness.Commitment
		require.NoError(t, json.Unmarshal(body, &pub))
		root, err := fairness.ParseHash(pub.Root)
		require.NoError(t, err)
		require.NoError(t, fairness.VerifyProof(a.p, root))
	}
	require.EqualValues(t, 3, gl.reads.Load(), "one build of each campaign's tree")
	for _, id := range ids {
		_, err := eng.Proof(ctx, id, "a")
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, gl.reads.Load(), "kept trees: nothing read again")
}
