package hongbao

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Audit is a campaign's conservation check, recomputed from the contents
// of Redis rather than from its counters: the claims and the packets still
// in the pools (and, for a sharded campaign, in transfers between shards),
// each summed on its own and compared with the counters and the total, and
// the grants streams checked against the claims. (A stream holds the grants
// not yet settled: settlement trims what it wrote to the ledger, so before
// settlement it holds every claim.)
type Audit struct {
	Status *Status
	// PoolCount and PoolCents sum the packets still in the pools.
	PoolCount, PoolCents int64
	// InFlightCount and InFlightCents sum the packets of transfers between
	// shards not yet applied at their destination.
	InFlightCount, InFlightCents int64
	// StreamCount and StreamCents sum the grants in the grants streams
	// (the unsettled ones).
	StreamCount, StreamCents int64
	// ClaimsCount and ClaimsCents sum the claims.
	ClaimsCount, ClaimsCents int64
	// DuplicateUsers counts users who appear in the streams more than once;
	// DuplicatePackets counts packets granted more than once.
	DuplicateUsers, DuplicatePackets int64
	// Problems lists what is wrong, in words (at most 20 listed).
	Problems []string
	// ProblemCount counts them all.
	ProblemCount int
}

// OK reports whether every check passed.
func (a *Audit) OK() bool { return a.ProblemCount == 0 }

func (a *Audit) problem(format string, args ...any) {
	a.ProblemCount++
	if len(a.Problems) < 20 {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

// Audit checks the invariants of campaign id from its contents: every user
// holds at most one packet, and only on the user's home shard; every packet
// went to at most one user and is in one place only (a pool, a claim or a
// transfer in flight); the streams and the claims agree; every shard's
// counters match its contents; and total = granted + in the pools + in
// flight + refunded, to the cent. It reads in pages and is exact only
// while no grab runs; audit a closed campaign.
//
// Its memory is indexed by packet, not by user: a few bits per packet and
// the claim of each packet (user and cents). A million-packet campaign
// audits in about 40 MB; maps keyed by user would take several times that.
func (e *Engine) Audit(ctx context.Context, id string) (*Audit, error) {
	if err := ValidateCampaignID(id); err != nil {
		return nil, err
	}
	r, snaps, err := e.read(ctx, id)
	if err != nil {
		return nil, opErr("audit", id, mapStoreErr(err))
	}
	st, err := statusFrom(id, snaps)
	if err != nil {
		return nil, err
	}
	au := &auditor{e: e, r: r, a: &Audit{Status: st}, ix: newPacketIndex(int64(st.Count))}
	if err := au.run(ctx, snaps); err != nil {
		return nil, opErr("audit", id, err)
	}
	return au.a, nil
}

// auditor holds one audit's state.
type auditor struct {
	e  *Engine
	r  *route
	a  *Audit
	ix *packetIndex
	// stray collects the users of stream grants that match no claim.
	stray map[string]int
}

// packetIndex is what the audit knows of each packet, by seq.
type packetIndex struct {
	n          int64
	inPool     bitset
	inStream   bitset
	inFlight   bitset
	claimUser  []string
	claimCents []int64
}

func newPacketIndex(n int64) *packetIndex {
	return &packetIndex{n: n, inPool: newBitset(n + 1), inStream: newBitset(n + 1), inFlight: newBitset(n + 1),
		claimUser: make([]string, n+1), claimCents: make([]int64, n+1)}
}

func (ix *packetIndex) inRange(seq int64) bool { return seq >= 1 && seq <= ix.n }

// shardSums are one shard's contents, to compare with its counters.
type shardSums struct{ poolCount, poolCents, claimsCount, claimsCents int64 }

func (au *auditor) run(ctx context.Context, snaps []redisstore.Snapshot) error {
	sums := make([]shardSums, au.r.shards)
	for k, keys := range au.r.keys {
		if err := au.pool(ctx, k, keys, &sums[k]); err != nil {
			return err
		}
	}
	for k, keys := range au.r.keys {
		if err := au.claims(ctx, k, keys, &sums[k]); err != nil {
			return err
		}
	}
	for k := range au.r.keys {
		if err := au.transfers(ctx, k); err != nil {
			return err
		}
	}
	for _, keys := range au.r.keys {
		if err := au.stream(ctx, keys); err != nil {
			return err
		}
	}
	if err := au.strayUsers(ctx); err != nil {
		return err
	}
	for k, snap := range snaps {
		au.shardCounters(k, snap, sums[k])
	}
	au.totals()
	return nil
}

// pool scans one shard's pool. Grabs take packets from the tail only, so
// the pool of a one-shard campaign is always packets 1..n in order; a
// shard's pool holds its share and whatever transfers brought, in no
// particular order, but each packet once in all pools.
func (au *auditor) pool(ctx context.Context, k int, keys redisstore.Keys, sum *shardSums) error {
	a, ix, st := au.a, au.ix, au.a.Status
	return au.e.store.ScanPool(ctx, keys, func(seq, cents int64) error {
		if au.r.shards == 1 && seq != a.PoolCount+1 {
			a.problem("pool position %d holds packet %d", a.PoolCount+1, seq)
		}
		a.PoolCount++
		a.PoolCents += cents
		sum.poolCount++
		sum.poolCents += cents
		if !ix.inRange(seq) {
			a.problem("pool of shard %d holds packet %d, outside 1..%d", k, seq, ix.n)
		} else if ix.inPool.has(seq) {
			a.DuplicatePackets++
			a.problem("packet %d is in the pools twice", seq)
		} else {
			ix.inPool.set(seq)
		}
		if cents < st.Min || (st.Max > 0 && cents > st.Max) {
			a.problem("pool packet %d of %d cents is outside [%d, %d]", seq, cents, st.Min, st.Max)
		}
		return nil
	})
}

// claims scans one shard's claims. A hash holds each user once, and a
// user's claim may live only on the user's home shard, so a user can hold
// two packets only if the claims and the stream disagree, which the stream
// pass reports, or if a claim sits on another shard, reported here.
func (au *auditor) claims(ctx context.Context, k int, keys redisstore.Keys, sum *shardSums) error {
	a, ix := au.a, au.ix
	return au.e.store.ScanClaims(ctx, keys, func(user string, seq, cents int64) error {
		if home := HomeShard(user, au.r.shards); home != k {
			a.problem("claim of %q is on shard %d; its home is shard %d", user, k, home)
		}
		if !ix.inRange(seq) {
			a.ClaimsCount++
			a.ClaimsCents += cents
			sum.claimsCount++
			sum.claimsCents += cents
			a.problem("claim of %q is packet %d, outside 1..%d", user, seq, ix.n)
			return nil
		}
		switch ix.claimUser[seq] {
		case user:
			return nil // HSCAN may return an entry twice
		case "":
		default:
			a.DuplicatePackets++
			a.problem("packet %d is claimed by %q and %q", seq, ix.claimUser[seq], user)
		}
		ix.claimUser[seq], ix.claimCents[seq] = user, cents
		a.ClaimsCount++
		a.ClaimsCents += cents
		sum.claimsCount++
		sum.claimsCents += cents
		if ix.inPool.has(seq) {
			a.problem("packet %d is claimed by %q and still in the pool", seq, user)
		}
		return nil
	})
}

// transfers checks the transfer records in flight out of shard k: a record
// its destination applied already holds packets that are in that pool now
// (finishing it only deletes it); one not applied holds packets that are
// nowhere else.
func (au *auditor) transfers(ctx context.Context, k int) error {
	a, ix, store := au.a, au.ix, au.e.store
	ts, err := store.Transfers(ctx, au.r.keys[k])
	if err != nil || len(ts) == 0 {
		return err
	}
	for _, t := range ts {
		if t.Dest < 0 || t.Dest >= au.r.shards || t.Dest == k {
			a.problem("transfer %s goes to shard %d", t.ID, t.Dest)
			continue
		}
		done, err := store.Applied(ctx, au.r.keys[t.Dest], []string{t.ID})
		if err != nil {
			return err
		}
		if done[0] {
			continue
		}
		for _, p := range t.Packets {
			seq, cents, _ := redisstore.ParseClaim(p) // checked when the record was read
			a.InFlightCount++
			a.InFlightCents += cents
			switch {
			case !ix.inRange(seq):
				a.problem("transfer %s holds packet %d, outside 1..%d", t.ID, seq, ix.n)
			case ix.inPool.has(seq) || ix.inFlight.has(seq):
				a.DuplicatePackets++
				a.problem("packet %d is in transfer %s and in a pool or another transfer", seq, t.ID)
			case ix.claimUser[seq] != "":
				a.DuplicatePackets++
				a.problem("packet %d is in transfer %s and claimed by %q", seq, t.ID, ix.claimUser[seq])
			default:
				ix.inFlight.set(seq)
			}
		}
	}
	return nil
}

// stream checks every grant in one shard's stream against the claim of its
// packet. A claim absent from the stream is normal: settlement trims what
// it wrote to the ledger.
func (au *auditor) stream(ctx context.Context, keys redisstore.Keys) error {
	a, ix := au.a, au.ix
	return au.e.store.ScanGrants(ctx, keys, func(g redisstore.StreamGrant) error {
		a.StreamCount++
		a.StreamCents += g.Cents
		if !ix.inRange(g.Seq) {
			a.problem("packet %d is outside 1..%d", g.Seq, ix.n)
			return nil
		}
		if ix.inStream.has(g.Seq) {
			a.DuplicatePackets++
			a.problem("packet %d is granted twice in the stream (again to %q)", g.Seq, g.User)
		}
		ix.inStream.set(g.Seq)
		if ix.inPool.has(g.Seq) {
			a.problem("packet %d is granted and still in the pool", g.Seq)
		}
		if ix.claimUser[g.Seq] != g.User || ix.claimCents[g.Seq] != g.Cents {
			if au.stray == nil {
				au.stray = map[string]int{}
			}
			au.stray[g.User] = 0
			if ix.claimUser[g.Seq] == "" {
				a.problem("stream grant of packet %d to %q has no claim", g.Seq, g.User)
			} else {
				a.problem("stream grant of packet %d is %q/%d cents, the claim says %q/%d cents",
					g.Seq, g.User, g.Cents, ix.claimUser[g.Seq], ix.claimCents[g.Seq])
			}
		}
		return nil
	})
}

// strayUsers counts, when something disagreed, the users the streams name
// more than once, in a second pass over only those users.
func (au *auditor) strayUsers(ctx context.Context) error {
	if len(au.stray) == 0 {
		return nil
	}
	for _, keys := range au.r.keys {
		err := au.e.store.ScanGrants(ctx, keys, func(g redisstore.StreamGrant) error {
			if k, ok := au.stray[g.User]; ok {
				au.stray[g.User] = k + 1
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for u, k := range au.stray {
		if k > 1 {
			au.a.DuplicateUsers++
			au.a.problem("user %q is granted %d times in the stream", u, k)
		}
	}
	return nil
}

// shardCounters compares shard k's counters with its contents: what it
// was dealt, plus what it borrowed, less what it lent, is what it granted
// and what its pool holds. A one-shard campaign records no share: its
// share is the whole campaign.
func (au *auditor) shardCounters(k int, snap redisstore.Snapshot, sum shardSums) {
	a := au.a
	if au.r.shards == 1 {
		return // totals() compares the whole campaign
	}
	if g, gc := snap.Int("granted_count"), snap.Int("granted_cents"); g != sum.claimsCount || gc != sum.claimsCents {
		a.problem("shard %d granted: counters %d packets, %d cents; claims %d, %d cents", k, g, gc, sum.claimsCount, sum.claimsCents)
	}
	if snap.Meta["state"] == string(StateSettled) {
		return // the pool went with the refund
	}
	holds := snap.Int("base_count") + snap.Int("in_count") - snap.Int("out_count")
	cents := snap.Int("base_cents") + snap.Int("in_cents") - snap.Int("out_cents")
	if holds != sum.claimsCount+sum.poolCount || cents != sum.claimsCents+sum.poolCents {
		a.problem("shard %d: dealt + borrowed - lent = %d packets, %d cents; granted + pool = %d, %d cents",
			k, holds, cents, sum.claimsCount+sum.poolCount, sum.claimsCents+sum.poolCents)
	}
}

// totals compares the campaign's counters and total with its contents.
func (au *auditor) totals() {
	a, st := au.a, au.a.Status
	if a.ClaimsCount != st.GrantedCount || a.ClaimsCents != st.GrantedCents {
		a.problem("granted: counters %d packets, %d cents; claims %d, %d cents", st.GrantedCount, st.GrantedCents, a.ClaimsCount, a.ClaimsCents)
	}
	if a.StreamCount > a.ClaimsCount {
		a.problem("the streams hold %d grants, more than the %d claims", a.StreamCount, a.ClaimsCount)
	}
	if a.PoolCount+a.InFlightCount != st.RemainingCount {
		a.problem("remaining: counters say %d packets; pools and transfers hold %d", st.RemainingCount, a.PoolCount+a.InFlightCount)
	}
	if got := a.ClaimsCents + a.PoolCents + a.InFlightCents + st.RefundedCents; got != st.Total {
		a.problem("conservation: granted %d + pool %d + in flight %d + refunded %d = %d cents, total is %d",
			a.ClaimsCents, a.PoolCents, a.InFlightCents, st.RefundedCents, got, st.Total)
	}
	if st.State != StateSettled && a.ClaimsCount+a.PoolCount+a.InFlightCount != int64(st.Count) {
		a.problem("packets: granted %d + pool %d + in flight %d != count %d", a.ClaimsCount, a.PoolCount, a.InFlightCount, st.Count)
	}
}

// bitset is a set of small non-negative integers.
type bitset []uint64

func newBitset(n int64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int64)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i int64) bool { return b[i>>6]&(1<<(i&63)) != 0 }
