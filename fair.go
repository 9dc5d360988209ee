package hongbao

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/ledger"
)

// Fairness (package fairness, docs/fairness.md): a campaign created with a
// ledger that is a ledger.Committer (both ledgers are) commits to its
// packets before it goes live; the engine then answers the commitment,
// each holder's inclusion proof and, once the campaign closed, the draw
// log.

var (
	// ErrNoCommitment: the campaign has no commitment: it was created
	// without a ledger that records one, or before commitments were.
	ErrNoCommitment = sentinel("no commitment recorded")
	// ErrNotClosed: the draw log of a campaign that is not closed yet; its
	// salts stay secret until then.
	ErrNotClosed = sentinel("campaign not closed")
)

// packetReader reads a campaign's recorded packets (ledger.Ledger does).
type packetReader interface {
	Packets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error
}

// committer is Config.Packets as a ledger.Committer, or nil.
func (e *Engine) committer() ledger.Committer {
	c, _ := e.cfg.Packets.(ledger.Committer)
	return c
}

// commit records the commitment to packets amounts of campaign c, after
// the packets and before the campaign goes live, so nothing is answered
// for a campaign whose commitment is not durable. A create run again (a
// retry, or one that takes a stalled load over) finds the commitment its
// first attempt recorded and keeps it, when the recorded salts and these
// amounts make its root; a commitment of other packets is a conflict and
// the campaign never goes live. Stopped between the packets and the
// commitment, the campaign is loading and the next create commits.
func (e *Engine) commit(ctx context.Context, c *Campaign, amounts []int64) error {
	cm := e.committer()
	if cm == nil {
		return nil
	}
	for attempt := 0; ; attempt++ {
		stored, err := cm.Commitment(ctx, c.ID)
		if err == nil {
			return e.sameCommitment(ctx, cm, stored, amounts)
		}
		if !errors.Is(err, ledger.ErrNoCommitment) {
			return ledgerErr("read the commitment", err)
		}
		salts, err := fairness.NewSalts(len(amounts))
		if err != nil {
			return err
		}
		key, err := fairness.NewHolderKey()
		if err != nil {
			return err
		}
		// A spec without a maximum is bounded by what the minimum of
		// every other packet leaves.
		most := c.Max
		if most <= 0 {
			most = c.Total - int64(c.Count-1)*c.Min
		}
		pub, err := fairness.Commit(c.ID, amounts, salts, c.Min, most, time.Now())
		if err != nil {
			return err
		}
		body, err := json.Marshal(pub)
		if err != nil {
			return err
		}
		rec := ledger.Commitment{Campaign: c.ID, Count: pub.Count, Cents: pub.TotalCents, Body: body, HolderKey: key}
		if _, err := hex.Decode(rec.Root[:], []byte(pub.Root)); err != nil {
			return err
		}
		err = cm.WriteCommitment(ctx, rec, salts)
		if err == nil || !errors.Is(err, ledger.ErrConflict) || attempt > 0 {
			if err != nil {
				return ledgerErr("record the commitment", err)
			}
			return nil
		}
		// Another create of the id committed first: read its commitment.
	}
}

// sameCommitment checks that the stored commitment is one of amounts.
func (e *Engine) sameCommitment(ctx context.Context, cm ledger.Committer, stored ledger.Commitment, amounts []int64) error {
	salts, err := cm.Salts(ctx, stored.Campaign)
	if err != nil {
		return ledgerErr("read the salts", err)
	}
	root, err := fairness.Root(stored.Campaign, amounts, salts)
	if err != nil {
		return fmt.Errorf("the recorded commitment: %w", err)
	}
	if root != fairness.Hash(stored.Root) {
		return &kindError{kind: ledger.ErrConflict, cause: fmt.Errorf("the recorded commitment %x is not of these packets", stored.Root)}
	}
	return nil
}

// Commitment returns campaign id's published commitment, byte for byte as
// it was recorded at create: ErrNoCommitment without one.
func (e *Engine) Commitment(ctx context.Context, id string) ([]byte, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	cm := e.committer()
	if cm == nil {
		return nil, opErr("commitment", id, ErrNoCommitment)
	}
	c, err := cm.Commitment(ctx, id)
	if errors.Is(err, ledger.ErrNoCommitment) {
		return nil, opErr("commitment", id, ErrNoCommitment)
	}
	if err != nil {
		return nil, opErr("commitment", id, ledgerErr("read the commitment", err))
	}
	return c.Body, nil
}

// maxTrees bounds the trees an engine keeps for proofs: a tree holds its
// levels (about 64 bytes a packet), the packets' cents and salts (40
// bytes a packet), so about 100 MB for a campaign of a million.
const maxTrees = 4

// maxTreeBuilds bounds the trees built at once: a build reads every packet
// and salt of a campaign from the ledger and holds them while it hashes,
// so a burst of first proofs over many campaigns must not build them all
// at once. The others wait their turn.
const maxTreeBuilds = 2

// treeBuildTimeout bounds one build. A build serves every caller waiting
// for the campaign's tree, so it does not end with the first caller's
// request (its context's cancellation is not passed on); this bounds it
// instead.
const treeBuildTimeout = 2 * time.Minute

// trees keeps the most recently used campaigns' trees for proofs, and
// builds each once however many callers ask for it at the same time.
type trees struct {
	mu    sync.Mutex
	byID  map[string]*fairTree
	order []string // least recently used first
	sf    singleflight.Group
	slots chan struct{} // one token a build in progress (maxTreeBuilds)

	// building and waiting count the builds in progress and those waiting
	// for a slot, for tests.
	building, waiting atomic.Int64
}

// fairTree is a campaign's tree with the packets and salts it was built
// from.
type fairTree struct {
	tree  *fairness.Tree
	cents []int64
	salts []byte
}

func newTrees() *trees {
	return &trees{byID: map[string]*fairTree{}, slots: make(chan struct{}, maxTreeBuilds)}
}

// cached returns the tree of campaign id if it is kept.
func (ts *trees) cached(id string) (*fairTree, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if ok {
		ts.touch(id)
	}
	return t, ok
}

// tree returns the tree of campaign id, built from the ledger's packets
// and salts on first use, and checked against the recorded root. Callers
// that ask at the same time share one build, which runs detached from
// their cancellation (a caller that gives up leaves it to the others) and
// within treeBuildTimeout; each caller waits for it as long as its own
// ctx allows.
func (e *Engine) tree(ctx context.Context, id string) (*fairTree, error) {
	ts := e.fair
	if t, ok := ts.cached(id); ok {
		return t, nil
	}
	ch := ts.sf.DoChan(id, func() (any, error) {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), treeBuildTimeout)
		defer cancel()
		ts.waiting.Add(1)
		select {
		case ts.slots <- struct{}{}:
			ts.waiting.Add(-1)
		case <-bctx.Done():
			ts.waiting.Add(-1)
			return nil, opErr("proof", id, bctx.Err())
		}
		defer func() { <-ts.slots }()
		// A build that ended while this one waited may have kept it.
		if t, ok := ts.cached(id); ok {
			return t, nil
		}
		ts.building.Add(1)
		defer ts.building.Add(-1)
		t, err := buildTree(bctx, e.cfg.Packets, id)
		if err != nil {
			return nil, err
		}
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.byID[id] = t
		ts.touch(id)
		if len(ts.order) > maxTrees {
			delete(ts.byID, ts.order[0])
			ts.order = ts.order[1:]
		}
		return t, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*fairTree), nil
	case <-ctx.Done():
		return nil, opErr("proof", id, ctx.Err())
	}
}

func (ts *trees) touch(id string) {
	for i, o := range ts.order {
		if o == id {
			ts.order = append(ts.order[:i], ts.order[i+1:]...)
			break
		}
	}
	ts.order = append(ts.order, id)
}

// CheckCommitment rebuilds the root of campaign id from the ledger's
// packets and salts and compares it with the recorded one: nil when they
// agree, ErrNoCommitment without one, a *CommitmentError when they do
// not. See CheckLedgerCommitment.
func (e *Engine) CheckCommitment(ctx context.Context, id string) error {
	_, err := buildTree(ctx, e.cfg.Packets, id)
	return err
}

// CheckLedgerCommitment rebuilds the root of campaign id from the packets
// and salts ledger l holds and compares it with the root it recorded at
// create (reconcile and rebuild call it): the committed root when they
// agree, ErrNoCommitment when l records none (or keeps no commitments),
// a *CommitmentError when a packet or a salt changed since.
func CheckLedgerCommitment(ctx context.Context, l ledger.Ledger, id string) (string, error) {
	t, err := buildTree(ctx, l, id)
	if err != nil {
		return "", err
	}
	return t.tree.Root().String(), nil
}

// CommitmentError says that the ledger's packets and salts no longer hash
// to the campaign's committed root: the ledger was changed after create.
type CommitmentError struct {
	Campaign string
	Root     string // committed
	Rebuilt  string // from the ledger's packets and salts
}

func (e *CommitmentError) Error() string {
	return fmt.Sprintf("hongbao: campaign %s: the ledger's packets and salts hash to %s, not to the committed root %s", e.Campaign, e.Rebuilt, e.Root)
}

// buildTree builds campaign id's tree from what recorder (Config.Packets,
// a ledger) holds, and checks it against the recorded root.
func buildTree(ctx context.Context, recorder any, id string) (*fairTree, error) {
	cm, ok1 := recorder.(ledger.Committer)
	pr, ok := recorder.(packetReader)
	if !ok1 || !ok {
		return nil, opErr("proof", id, ErrNoCommitment)
	}
	c, err := cm.Commitment(ctx, id)
	if errors.Is(err, ledger.ErrNoCommitment) {
		return nil, opErr("proof", id, ErrNoCommitment)
	}
	if err != nil {
		return nil, opErr("proof", id, ledgerErr("read the commitment", err))
	}
	salts, err := cm.Salts(ctx, id)
	if errors.Is(err, ledger.ErrDrawDataPurged) {
		return nil, opErr("proof", id, ErrDrawLogExpired)
	}
	if err != nil {
		return nil, opErr("proof", id, ledgerErr("read the salts", err))
	}
	cents := make([]int64, 0, c.Count)
	if err := pr.Packets(ctx, id, func(p ledger.Packet) error {
		if p.Seq != int64(len(cents))+1 {
			return fmt.Errorf("packet seq %d where %d belongs", p.Seq, len(cents)+1)
		}
		cents = append(cents, p.Cents)
		return nil
	}); err != nil {
		return nil, opErr("proof", id, ledgerErr("read the packets", err))
	}
	if int64(len(cents)) != c.Count {
		return nil, &CommitmentError{Campaign: id, Root: hex.EncodeToString(c.Root[:]), Rebuilt: fmt.Sprintf("(%d packets, not %d)", len(cents), c.Count)}
	}
	t, err := fairness.NewTree(id, cents, salts)
	if err != nil {
		return nil, opErr("proof", id, err)
	}
	if t.Root() != fairness.Hash(c.Root) {
		return nil, &CommitmentError{Campaign: id, Root: hex.EncodeToString(c.Root[:]), Rebuilt: t.Root().String()}
	}
	return &fairTree{tree: t, cents: cents, salts: salts}, nil
}

// Proof returns the inclusion proof of the packet user holds in campaign
// id (ErrNoGrant when none): its salt and the path to the committed root.
// A salt is served only to its holder.
func (e *Engine) Proof(ctx context.Context, id, user string) (fairness.Proof, error) {
	g, err := e.Held(ctx, id, user)
	if err != nil {
		return fairness.Proof{}, err
	}
	t, err := e.tree(ctx, id)
	if err != nil {
		return fairness.Proof{}, err
	}
	if g.Seq < 1 || g.Seq > int64(len(t.cents)) || t.cents[g.Seq-1] != g.Cents {
		return fairness.Proof{}, opErr("proof", id, fmt.Errorf("the packet held (seq %d, %d cents) is not a committed packet", g.Seq, g.Cents))
	}
	return fairness.NewProof(id, t.tree, g.Seq, g.Cents, t.salts[fairness.SaltSize*(g.Seq-1):fairness.SaltSize*g.Seq])
}

// closedFor reports whether campaign id is closed for good: closed or
// settled in Redis, or refunded in the ledger (Redis may have retired it).
func (e *Engine) closedFor(ctx context.Context, id string) (bool, time.Time, error) {
	st, err := e.Status(ctx, id)
	if err == nil {
		return st.State == StateClosed || st.State == StateSettled, st.ClosesAt, nil
	}
	if !errors.Is(err, ErrCampaignNotFound) {
		return false, time.Time{}, err
	}
	tr, ok := e.cfg.Packets.(interface {
		Totals(ctx context.Context, campaign string) (ledger.Totals, error)
	})
	if !ok {
		return false, time.Time{}, err
	}
	tot, terr := tr.Totals(ctx, id)
	if terr != nil {
		return false, time.Time{}, opErr("draw log", id, ledgerErr("read the totals", terr))
	}
	if !tot.RefundDone {
		return false, time.Time{}, err
	}
	var closes time.Time
	if e.terms != nil {
		if t, err := e.terms.Terms(ctx, id); err == nil {
			closes = time.UnixMilli(t.ClosesAt)
			if t.ClosedAt != 0 {
				closes = time.UnixMilli(t.ClosedAt)
			}
		}
	}
	return true, closes, nil
}

// DrawLog writes campaign id's draw log to w once the campaign closed
// (ErrNotClosed before): one JSON line per packet in seq order, its
// salt, and its holder under the campaign's pseudonym (null when the
// ledger records no grant of it, as for a packet granted and not settled
// yet). It returns when the campaign closed (its window's end, or the
// operator's close), for a retention check.
func (e *Engine) DrawLog(ctx context.Context, id string, retention time.Duration, now time.Time, w io.Writer) error {
	if err := ValidateCampaignID(id); err != nil {
		return err
	}
	closed, closedAt, err := e.closedFor(ctx, id)
	if err != nil {
		return err
	}
	if !closed {
		return opErr("draw log", id, ErrNotClosed)
	}
	if retention > 0 && !closedAt.IsZero() && now.After(closedAt.Add(retention)) {
		return opErr("draw log", id, ErrDrawLogExpired)
	}
	cm := e.committer()
	if cm == nil {
		return opErr("draw log", id, ErrNoCommitment)
	}
	c, err := cm.Commitment(ctx, id)
	if errors.Is(err, ledger.ErrNoCommitment) {
		return opErr("draw log", id, ErrNoCommitment)
	}
	if err != nil {
		return opErr("draw log", id, ledgerErr("read the commitment", err))
	}
	salts, err := cm.Salts(ctx, id)
	if errors.Is(err, ledger.ErrDrawDataPurged) {
		return opErr("draw log", id, ErrDrawLogExpired)
	}
	if err != nil {
		return opErr("draw log", id, ledgerErr("read the salts", err))
	}
	enc := json.NewEncoder(w)
	err = cm.DrawRows(ctx, id, func(r ledger.DrawRow) error {
		if r.Seq < 1 || r.Seq > c.Count {
			return fmt.Errorf("packet seq %d of %d", r.Seq, c.Count)
		}
		line := fairness.DrawLine{Seq: r.Seq, Cents: r.Cents, Salt: hex.EncodeToString(salts[fairness.SaltSize*(r.Seq-1) : fairness.SaltSize*r.Seq])}
		if r.User != "" {
			h := fairness.Pseudonym(c.HolderKey, r.User)
			line.Holder = &h
			if !r.GrantedAt.IsZero() {
				at := r.GrantedAt
				line.GrantedAt = &at
			}
		}
		return enc.Encode(line)
	})
	if err != nil {
		return opErr("draw log", id, err)
	}
	return nil
}

// ErrDrawLogExpired: the campaign closed longer ago than the draw log's
// retention, or its draw data (salts) was purged when that ended.
var ErrDrawLogExpired = sentinel("draw log past its retention")

// ErrNotSettled: the ledger has not recorded the grant yet; settlement
// writes it within moments of the grant. Retrying is safe.
var ErrNotSettled = sentinel("grant not settled yet")

// GrantTime is Held with the time the packet was granted, as the ledger
// recorded it (Grant.GrantedAt: Redis' clock at the grant, the time of
// its settlement stream entry): what a receipt asked for after the grab
// states. ErrNotSettled while the ledger has not recorded the grant yet;
// a grant recorded without its time (settled before the ledger kept
// grant times) has a zero GrantedAt. ErrNoCommitment without a ledger
// that keeps grants (Config.Packets a ledger.Committer).
func (e *Engine) GrantTime(ctx context.Context, id, user string) (Grant, error) {
	g, err := e.Held(ctx, id, user)
	if err != nil {
		return Grant{}, err
	}
	cm := e.committer()
	if cm == nil {
		return Grant{}, opErr("grant time", id, ErrNoCommitment)
	}
	holder, at, err := cm.GrantTime(ctx, id, g.Seq)
	if errors.Is(err, ledger.ErrNoGrant) {
		return Grant{}, opErr("grant time", id, ErrNotSettled)
	}
	if err != nil {
		return Grant{}, opErr("grant time", id, ledgerErr("read the grant", err))
	}
	if holder != user {
		return Grant{}, opErr("grant time", id, fmt.Errorf("packet %d is held by %q in Redis and by another user in the ledger", g.Seq, user))
	}
	g.GrantedAt = at
	return g, nil
}
