package settle

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Report compares one campaign in Redis with the ledger.
type Report struct {
	Campaign           string `json:"campaign"`
	State              string `json:"state"`
	TotalCents         int64  `json:"total_cents"`
	GrantedRedis       int64  `json:"granted_redis"`
	GrantedLedger      int64  `json:"granted_ledger"`
	GrantedCentsRedis  int64  `json:"granted_cents_redis"`
	GrantedCentsLedger int64  `json:"granted_cents_ledger"`
	PoolCents          int64  `json:"pool_cents"`
	LostCents          int64  `json:"lost_cents"`
	FundCents          int64  `json:"fund_cents"`
	RefundCents        int64  `json:"refund_cents"`
	RefundRedisCents   int64  `json:"refund_redis_cents"`
	EscrowCents        int64  `json:"escrow_cents"`
	Unsettled          int64  `json:"unsettled_entries"`
	Dead               int64  `json:"dead"`
	// ReservedCents and CompensationCents are a discount campaign's
	// reservations held and compensation (ReconcileDiscount; part of
	// PoolCents, the latter).
	ReservedCents     int64    `json:"reserved_cents,omitempty"`
	CompensationCents int64    `json:"compensation_cents,omitempty"`
	Differences       []string `json:"differences"`
	DifferenceCount   int      `json:"difference_count"`
	OK                bool     `json:"ok"`
	// CommitmentRoot is the root the campaign committed to at create,
	// which the ledger's packets and salts were found to hash to; "" when
	// the ledger records no commitment (a difference says when they do
	// not hash to it).
	CommitmentRoot string `json:"commitment_root,omitempty"`
	// DrawDataPurged says that the campaign's salts were deleted after
	// their retention (settle.Config.DrawDataRetention): its root is kept
	// but cannot be recomputed, and CommitmentRoot is "".
	DrawDataPurged bool `json:"draw_data_purged,omitempty"`

	items int // grant-by-grant lines listed so far
}

// diff records a difference of one grant or packet; at most
// maxItemDifferences of them are listed (all are counted).
func (r *Report) diff(format string, a ...any) {
	r.DifferenceCount++
	if r.items < maxItemDifferences {
		r.items++
		r.Differences = append(r.Differences, fmt.Sprintf(format, a...))
	}
}

// summary records a difference of the campaign as a whole (counters,
// balances, conservation, unsettled and dead entries). Those are always
// listed, however many grant differences came before.
func (r *Report) summary(format string, a ...any) {
	r.DifferenceCount++
	r.Differences = append(r.Differences, fmt.Sprintf(format, a...))
}

// maxItemDifferences bounds the grant-by-grant lines of a report.
const maxItemDifferences = 100

// Reconcile compares campaign id in Redis (claims, counters, pool, stream,
// dead stream) with the ledger (grants, fund, refund, escrow), grant by
// grant, and checks conservation from contents, not only from counters.
// It reads in pages; run it on a closed campaign. namespace is the
// deployment's ("" for the default; see Config.Namespace).
func Reconcile(ctx context.Context, rc rueidis.Client, namespace string, l ledger.Ledger, id string) (*Report, error) {
	store, err := storeOf(rc, namespace)
	if err != nil {
		return nil, err
	}
	return reconcile(ctx, store, l, id)
}

// Reconcile is Reconcile with the worker's Redis and ledger (and its
// script flavour, for the emulator).
func (w *Worker) Reconcile(ctx context.Context, id string) (*Report, error) {
	if w.cfg.Ledger == nil {
		return nil, errors.New("settle: reconcile needs a ledger, not a sink")
	}
	return reconcile(ctx, w.store, w.cfg.Ledger, id)
}

func reconcile(ctx context.Context, store *redisstore.Store, l ledger.Ledger, id string) (*Report, error) {
	v, err := store.Read(ctx, id)
	if err != nil {
		return nil, err
	}
	root := v.Root()
	r := &Report{Campaign: id, State: root.Meta["state"], TotalCents: root.Int("total"), Differences: []string{}}
	// The claims are indexed by seq, sized from the campaign's count up
	// front: a campaign of a million grants is compared without a map
	// keyed by user.
	rc := &reconciler{store: store, l: l, v: v, r: r, claims: newClaims(root.Int("count"))}
	// The ledger's grants are read while Redis is: the two reads
	// overlap, and the comparison takes the grants as they come.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc.grants, rc.grantsErr = readGrants(ctx, l, id)
	steps := []func(context.Context) error{rc.redisClaims, rc.redisPools, rc.ledgerGrants, rc.ledgerTotals, rc.streams, rc.commitment}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	r.OK = r.DifferenceCount == 0
	return r, nil
}

// reconciler holds one reconciliation's state.
type reconciler struct {
	store  *redisstore.Store
	l      ledger.Ledger
	v      *redisstore.View
	r      *Report
	claims claims // seq -> claim, over all shards
	// doubles are the claims of a packet claimed already, which claims
	// does not hold.
	doubles []seqUser
	pooled  int64 // packets in the pools and in flight
	// grants brings the ledger's grants in seq order, in chunks;
	// grantsErr says, once it is closed, how their read ended.
	grants    <-chan []ledger.Grant
	grantsErr func() error
}

// grantChunk and prefetchChunks bound what readGrants holds ahead of
// the comparison: about a million grants; then it waits.
const grantChunk, prefetchChunks = 8192, 128

// readGrants reads campaign id's grants from l in the background, in
// chunks, until ctx ends. The function returned waits for the read's end
// and returns its error.
func readGrants(ctx context.Context, l ledger.Ledger, id string) (<-chan []ledger.Grant, func() error) {
	ch := make(chan []ledger.Grant, prefetchChunks)
	done := make(chan error, 1)
	send := func(chunk []ledger.Grant) error {
		select {
		case ch <- chunk:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	go func() {
		defer close(ch)
		chunk := make([]ledger.Grant, 0, grantChunk)
		err := l.Grants(ctx, id, func(g ledger.Grant) error {
			chunk = append(chunk, g)
			if len(chunk) < grantChunk {
				return nil
			}
			err := send(chunk)
			chunk = make([]ledger.Grant, 0, grantChunk)
			return err
		})
		if err == nil && len(chunk) > 0 {
			err = send(chunk)
		}
		done <- err
	}()
	return ch, func() error { return <-done }
}

// redisClaims reads every shard's claims and compares them with the
// shards' counters. A packet claimed twice is found as the claims go in
// (indexed by seq), a user holding two packets afterwards (users'
// hashes sorted, so no map of a million users is needed).
func (rc *reconciler) redisClaims(ctx context.Context) error {
	r := rc.r
	var count, cents int64
	seed := maphash.MakeSeed()
	var hashes []uint64
	for k, keys := range rc.v.Shards {
		snap := rc.v.Snaps[k]
		count += snap.Int("granted_count")
		cents += snap.Int("granted_cents")
		r.RefundRedisCents += snap.Int("refunded_cents")
		if hashes == nil {
			hashes = make([]uint64, 0, min(max(count, 0), 1<<24))
		}
		err := rc.store.ScanClaims(ctx, keys, func(u string, seq, c int64) error {
			r.GrantedRedis++
			r.GrantedCentsRedis += c
			hashes = append(hashes, maphash.String(seed, u))
			if other, dup := rc.claims.get(seq); dup {
				r.diff("packet %d is claimed by %q and %q in Redis", seq, other.user, u)
				rc.doubles = append(rc.doubles, seqUser{seq, u})
				return nil
			}
			rc.claims.set(seq, claim{user: u, cents: c})
			return nil
		})
		if err != nil {
			return err
		}
	}
	rc.twiceClaimed(seed, hashes)
	if count != r.GrantedRedis || cents != r.GrantedCentsRedis {
		r.summary("Redis counters say %d grants, %d cents; the claims hold %d, %d cents", count, cents, r.GrantedRedis, r.GrantedCentsRedis)
	}
	return nil
}

// twiceClaimed reports the users who hold more than one packet in Redis
// (claims on several shards): their hashes, among hashes, sorted, are
// equal; the claims are then read again for those hashes only, so a
// collision of two users' hashes reports nothing.
func (rc *reconciler) twiceClaimed(seed maphash.Seed, hashes []uint64) {
	slices.Sort(hashes)
	suspect := map[uint64]bool{}
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			suspect[hashes[i]] = true
		}
	}
	if len(suspect) == 0 {
		return
	}
	held := map[string][]int64{}
	rc.claims.each(func(seq int64, c *claim) {
		if suspect[maphash.String(seed, c.user)] {
			held[c.user] = append(held[c.user], seq)
		}
	})
	for _, d := range rc.doubles {
		if suspect[maphash.String(seed, d.user)] {
			held[d.user] = append(held[d.user], d.seq)
		}
	}
	for u, seqs := range held {
		if len(seqs) > 1 {
			rc.r.diff("user %q holds packets %d and %d in Redis", u, seqs[0], seqs[1])
		}
	}
}

type seqUser struct {
	seq  int64
	user string
}

// claim is a packet's claim in Redis; inLedger is set once the ledger's
// grants hold it, held marks a slot of claims.dense that holds a claim.
type claim struct {
	user           string
	cents          int64
	inLedger, held bool
}

// claims maps a packet's seq to its claim: a slice for the seqs
// 1..count of the campaign's packets, where every claim should be, and a
// map for any other.
type claims struct {
	dense []claim
	other map[int64]*claim
}

func newClaims(count int64) claims {
	n := min(max(count, 0), 1<<26) + 1
	return claims{dense: make([]claim, n), other: map[int64]*claim{}}
}

// get returns seq's claim, if there is one; the pointer lets the caller
// mark it.
func (cs *claims) get(seq int64) (*claim, bool) {
	if seq >= 1 && seq < int64(len(cs.dense)) {
		return &cs.dense[seq], cs.dense[seq].held
	}
	c, ok := cs.other[seq]
	return c, ok
}

func (cs *claims) set(seq int64, c claim) {
	if seq >= 1 && seq < int64(len(cs.dense)) {
		c.held = true
		cs.dense[seq] = c
		return
	}
	cs.other[seq] = &c
}

// each calls fn for every claim, in seq order for the dense ones.
func (cs *claims) each(fn func(seq int64, c *claim)) {
	for i := range cs.dense {
		if cs.dense[i].held {
			fn(int64(i), &cs.dense[i])
		}
	}
	for seq, c := range cs.other {
		fn(seq, c)
	}
}

// redisPools sums the packets in the pools and in transfers between
// shards not yet applied.
func (rc *reconciler) redisPools(ctx context.Context) error {
	r := rc.r
	seen := func(seq, cents int64) {
		rc.pooled++
		r.PoolCents += cents
		if c, ok := rc.claims.get(seq); ok {
			r.diff("packet %d is in the pool and claimed by %q", seq, c.user)
		}
	}
	for k, keys := range rc.v.Shards {
		if err := rc.store.ScanPool(ctx, keys, func(seq, cents int64) error { seen(seq, cents); return nil }); err != nil {
			return err
		}
		err := rc.store.ScanLost(ctx, keys, func(seq, cents int64) error {
			r.LostCents += cents
			if c, ok := rc.claims.get(seq); ok {
				r.diff("packet %d is lost and claimed by %q", seq, c.user)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := inTransfer(ctx, rc.store, rc.v.Shards, rc.v.Snaps, k, r, seen); err != nil {
			return err
		}
	}
	return nil
}

// inTransfer calls seen for every packet (or discount amount) of a
// transfer from shard k that its destination has not applied yet: it has
// left k's pool and is in no other. A transfer to a shard that does not
// exist is a difference of r.
func inTransfer(ctx context.Context, store *redisstore.Store, shards []redisstore.Keys, snaps []redisstore.Snapshot, k int, r *Report, seen func(seq, cents int64)) error {
	if snaps[k].Transfers == 0 {
		return nil
	}
	ts, err := store.Transfers(ctx, shards[k])
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Dest < 0 || t.Dest >= len(shards) {
			r.summary("transfer %s goes to shard %d of %d", t.ID, t.Dest, len(shards))
			continue
		}
		done, err := store.Applied(ctx, shards[t.Dest], []string{t.ID})
		if err != nil {
			return err
		}
		for _, p := range t.Packets {
			if seq, cents, err := redisstore.ParseClaim(p); err == nil && !done[0] {
				seen(seq, cents)
			}
		}
	}
	return nil
}

// ledgerGrants compares the ledger's grants with the claims, grant by
// grant.
func (rc *reconciler) ledgerGrants(ctx context.Context) error {
	r := rc.r
	for chunk := range rc.grants {
		for _, g := range chunk {
			r.GrantedLedger++
			r.GrantedCentsLedger += g.Cents
			c, ok := rc.claims.get(g.Seq)
			switch {
			case !ok:
				r.diff("extra in the ledger: %q holds packet %d (%d cents), Redis has no claim of it", g.User, g.Seq, g.Cents)
			case c.user != g.User || c.cents != g.Cents:
				r.diff("mismatch for packet %d: Redis gives it to %q (%d cents), the ledger to %q (%d cents)",
					g.Seq, c.user, c.cents, g.User, g.Cents)
			default:
				c.inLedger = true
			}
		}
	}
	if err := rc.grantsErr(); err != nil {
		return err
	}
	rc.claims.each(func(seq int64, c *claim) {
		if !c.inLedger {
			r.diff("missing from the ledger: %q packet %d (%d cents)", c.user, seq, c.cents)
		}
	})
	// Packets recorded at create (older ledgers have none): every grant
	// is one of them, with its amount.
	err := rc.l.MismatchedGrants(ctx, r.Campaign, func(m ledger.Mismatch) error {
		r.diff("ledger grant of packet %d to %q (%d cents) does not match the packet recorded at create (%d cents)",
			m.Grant.Seq, m.Grant.User, m.Grant.Cents, m.Packet.Cents)
		return nil
	})
	if err != nil && !errors.Is(err, ledger.ErrNoPackets) {
		return err
	}
	return nil
}

// ledgerTotals compares the ledger's balances with the campaign and checks
// conservation in Redis.
func (rc *reconciler) ledgerTotals(ctx context.Context) error {
	r := rc.r
	t, err := rc.l.Totals(ctx, r.Campaign)
	if err != nil {
		return err
	}
	r.FundCents, r.RefundCents, r.EscrowCents = t.Funded, t.Refunded, t.Escrow
	if t.Funded != r.TotalCents {
		r.summary("fund entry is %d cents, the campaign total is %d", t.Funded, r.TotalCents)
	}
	if t.PacketCount > 0 && (t.PacketCount != rc.v.Root().Int("count") || t.PacketCents != r.TotalCents) {
		r.summary("packets recorded at create: %d, %d cents; the campaign has %d, %d cents",
			t.PacketCount, t.PacketCents, rc.v.Root().Int("count"), r.TotalCents)
	}
	if t.GrantCount != r.GrantedLedger || t.GrantCents != r.GrantedCentsLedger {
		r.summary("ledger totals say %d grants, %d cents; its rows hold %d, %d", t.GrantCount, t.GrantCents, r.GrantedLedger, r.GrantedCentsLedger)
	}
	if t.Escrow != t.Funded-t.GrantCents-t.Refunded {
		r.summary("escrow balance %d != funded %d - granted %d - refunded %d", t.Escrow, t.Funded, t.GrantCents, t.Refunded)
	}
	// Packets a rebuild found lost are out of the pools until the
	// refund, which takes their cents.
	lost := r.LostCents
	if r.State == "settled" {
		lost = 0
	}
	if r.GrantedCentsRedis+r.PoolCents+lost+r.RefundRedisCents != r.TotalCents {
		r.summary("conservation in Redis: claims %d + pool %d + lost %d + refunded %d != total %d",
			r.GrantedCentsRedis, r.PoolCents, lost, r.RefundRedisCents, r.TotalCents)
	}
	if r.State == "settled" {
		if !t.RefundDone || t.Refunded != r.RefundRedisCents {
			r.summary("refund: ledger %d cents (recorded %v), Redis %d", t.Refunded, t.RefundDone, r.RefundRedisCents)
		}
		if t.Escrow != 0 {
			r.summary("settled, yet escrow holds %d cents", t.Escrow)
		}
		if rc.pooled != 0 {
			r.summary("settled, yet %d packets are still in the pool", rc.pooled)
		}
	} else if t.RefundDone && t.Refunded+r.GrantedCentsLedger != r.TotalCents {
		r.summary("ledger refunded %d cents while the campaign is %s", t.Refunded, r.State)
	}
	return nil
}

// streams counts what settlement has left on every shard's stream.
func (rc *reconciler) streams(ctx context.Context) error {
	return countStreams(ctx, rc.store, rc.v.Shards, rc.r, "grants")
}

// countStreams counts in r what settlement has left on every shard's
// stream (called stream in the report), and the dead entries.
func countStreams(ctx context.Context, store *redisstore.Store, shards []redisstore.Keys, r *Report, stream string) error {
	for _, keys := range shards {
		g, err := store.Group(ctx, keys)
		if err != nil {
			return err
		}
		r.Unsettled += g.Lag + g.Pending
		r.Dead += g.Dead
	}
	if r.Unsettled > 0 {
		r.summary("%d %s stream entries are not settled yet", r.Unsettled, stream)
	}
	if r.Dead > 0 {
		r.summary("%d entries in the dead stream wait for an operator", r.Dead)
	}
	return nil
}
