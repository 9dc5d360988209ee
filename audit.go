package hongbao

import (
	"context"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Audit is a campaign's conservation check, recomputed from the contents
// of Redis rather than from its counters: the claims hash and the packets
// still in the pool, each summed on its own and compared with the counters
// and the total, and the grants stream checked against the claims. (The
// stream holds the grants not yet settled: settlement trims what it wrote
// to the ledger, so before settlement it holds every claim.)
type Audit struct {
	Status *Status
	// PoolCount and PoolCents sum the packets still in the pool.
	PoolCount, PoolCents int64
	// StreamCount and StreamCents sum the grants in the grants stream (the
	// unsettled ones).
	StreamCount, StreamCents int64
	// ClaimsCount and ClaimsCents sum the claims hash.
	ClaimsCount, ClaimsCents int64
	// DuplicateUsers counts users who appear in the stream more than once;
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
// holds at most one packet, every packet went to at most one user, the
// stream and the claims agree, and total = granted + in the pool +
// refunded, to the cent. It reads in pages and is exact only while no grab
// runs; audit a closed campaign.
//
// Its memory is indexed by packet, not by user: a bit per packet for the
// pool and for the stream, and the claim of each packet (user and cents).
// A million-packet campaign audits in about 40 MB; maps keyed by user
// would take several times that.
func (e *Engine) Audit(ctx context.Context, id string) (*Audit, error) {
	st, err := e.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	a := &Audit{Status: st}
	n := int64(st.Count)
	inRange := func(seq int64) bool { return seq >= 1 && seq <= n }
	inPool := newBitset(n + 1)
	err = e.store.ScanPool(ctx, id, func(seq, cents int64) error {
		if seq != a.PoolCount+1 {
			// Grabs take packets from the tail only, so what is left is
			// always packets 1..n in order.
			a.problem("pool position %d holds packet %d", a.PoolCount+1, seq)
		}
		a.PoolCount++
		a.PoolCents += cents
		if inRange(seq) {
			inPool.set(seq)
		}
		if cents < st.Min || (st.Max > 0 && cents > st.Max) {
			a.problem("pool packet %d of %d cents is outside [%d, %d]", seq, cents, st.Min, st.Max)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}

	// The claims, by packet. A hash holds each user once, so a user can
	// hold two packets only if the claims and the stream disagree, which
	// the stream pass below reports.
	claimUser := make([]string, n+1)
	claimCents := make([]int64, n+1)
	err = e.store.ScanClaims(ctx, id, func(user string, seq, cents int64) error {
		if !inRange(seq) {
			a.ClaimsCount++
			a.ClaimsCents += cents
			a.problem("claim of %q is packet %d, outside 1..%d", user, seq, n)
			return nil
		}
		switch claimUser[seq] {
		case user:
			return nil // HSCAN may return an entry twice
		case "":
		default:
			a.DuplicatePackets++
			a.problem("packet %d is claimed by %q and %q", seq, claimUser[seq], user)
		}
		claimUser[seq], claimCents[seq] = user, cents
		a.ClaimsCount++
		a.ClaimsCents += cents
		if inPool.has(seq) {
			a.problem("packet %d is claimed by %q and still in the pool", seq, user)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}

	// The stream: every grant in it matches the claim of its packet. A
	// claim absent from the stream is normal: settlement trims what it
	// wrote to the ledger.
	inStream := newBitset(n + 1)
	var stray map[string]int // users of grants that match no claim
	err = e.store.ScanGrants(ctx, id, func(g redisstore.StreamGrant) error {
		a.StreamCount++
		a.StreamCents += g.Cents
		if !inRange(g.Seq) {
			a.problem("packet %d is outside 1..%d", g.Seq, n)
			return nil
		}
		if inStream.has(g.Seq) {
			a.DuplicatePackets++
			a.problem("packet %d is granted twice in the stream (again to %q)", g.Seq, g.User)
		}
		inStream.set(g.Seq)
		if inPool.has(g.Seq) {
			a.problem("packet %d is granted and still in the pool", g.Seq)
		}
		if claimUser[g.Seq] != g.User || claimCents[g.Seq] != g.Cents {
			if stray == nil {
				stray = map[string]int{}
			}
			stray[g.User] = 0
			if claimUser[g.Seq] == "" {
				a.problem("stream grant of packet %d to %q has no claim", g.Seq, g.User)
			} else {
				a.problem("stream grant of packet %d is %q/%d cents, the claim says %q/%d cents",
					g.Seq, g.User, g.Cents, claimUser[g.Seq], claimCents[g.Seq])
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}
	if len(stray) > 0 {
		// Something disagrees: count the users the stream names more than
		// once, in a second pass over only those users.
		err = e.store.ScanGrants(ctx, id, func(g redisstore.StreamGrant) error {
			if k, ok := stray[g.User]; ok {
				stray[g.User] = k + 1
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
		}
		for u, k := range stray {
			if k > 1 {
				a.DuplicateUsers++
				a.problem("user %q is granted %d times in the stream", u, k)
			}
		}
	}

	if a.ClaimsCount != st.GrantedCount || a.ClaimsCents != st.GrantedCents {
		a.problem("granted: counters %d packets, %d cents; claims %d, %d cents", st.GrantedCount, st.GrantedCents, a.ClaimsCount, a.ClaimsCents)
	}
	if a.StreamCount > a.ClaimsCount {
		a.problem("the stream holds %d grants, more than the %d claims", a.StreamCount, a.ClaimsCount)
	}
	if a.PoolCount != st.RemainingCount {
		a.problem("pool length %d, but %d packets counted", st.RemainingCount, a.PoolCount)
	}
	if got := a.ClaimsCents + a.PoolCents + st.RefundedCents; got != st.Total {
		a.problem("conservation: granted %d + pool %d + refunded %d = %d cents, total is %d",
			a.ClaimsCents, a.PoolCents, st.RefundedCents, got, st.Total)
	}
	if st.State != StateSettled && a.ClaimsCount+a.PoolCount != int64(st.Count) {
		a.problem("packets: granted %d + pool %d != count %d", a.ClaimsCount, a.PoolCount, st.Count)
	}
	return a, nil
}

// bitset is a set of small non-negative integers.
type bitset []uint64

func newBitset(n int64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int64)      { b[i>>6] |= 1 << (i & 63) }
func (b bitset) has(i int64) bool { return b[i>>6]&(1<<(i&63)) != 0 }
