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
func (e *Engine) Audit(ctx context.Context, id string) (*Audit, error) {
	st, err := e.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	a := &Audit{Status: st}
	inPool := map[int64]bool{}
	err = e.store.ScanPool(ctx, id, func(seq, cents int64) error {
		if seq != a.PoolCount+1 {
			// Grabs take packets from the tail only, so what is left is
			// always packets 1..n in order.
			a.problem("pool position %d holds packet %d", a.PoolCount+1, seq)
		}
		a.PoolCount++
		a.PoolCents += cents
		inPool[seq] = true
		if cents < st.Min || (st.Max > 0 && cents > st.Max) {
			a.problem("pool packet %d of %d cents is outside [%d, %d]", seq, cents, st.Min, st.Max)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}
	type packet struct{ seq, cents int64 }
	byUser := map[string]packet{}
	bySeq := map[int64]string{}
	err = e.store.ScanGrants(ctx, id, func(g redisstore.StreamGrant) error {
		a.StreamCount++
		a.StreamCents += g.Cents
		if _, dup := byUser[g.User]; dup {
			a.DuplicateUsers++
			a.problem("user %q granted twice in the stream", g.User)
		}
		if u, dup := bySeq[g.Seq]; dup {
			a.DuplicatePackets++
			a.problem("packet %d granted to %q and %q", g.Seq, u, g.User)
		}
		if inPool[g.Seq] {
			a.problem("packet %d is granted and still in the pool", g.Seq)
		}
		if g.Seq < 1 || g.Seq > int64(st.Count) {
			a.problem("packet %d is outside 1..%d", g.Seq, st.Count)
		}
		byUser[g.User] = packet{g.Seq, g.Cents}
		bySeq[g.Seq] = g.User
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}
	claims := map[string]packet{}
	err = e.store.ScanClaims(ctx, id, func(user string, seq, cents int64) error {
		claims[user] = packet{seq, cents} // HSCAN may repeat an entry; the map keeps one
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hongbao: audit %s: %w", id, err)
	}
	for u, p := range claims {
		a.ClaimsCount++
		a.ClaimsCents += p.cents
		// A claim absent from the stream is normal: settlement trims what
		// it wrote to the ledger. One present must agree.
		if s, ok := byUser[u]; ok && s != p {
			a.problem("claim of %q is packet %d/%d cents, the stream says %d/%d", u, p.seq, p.cents, s.seq, s.cents)
		}
	}
	for u := range byUser {
		if _, ok := claims[u]; !ok {
			a.problem("stream grant of %q has no claim", u)
		}
	}
	claimSeq := make(map[int64]string, len(claims))
	for u, p := range claims {
		if other, dup := claimSeq[p.seq]; dup {
			a.DuplicatePackets++
			a.problem("packet %d is claimed by %q and %q", p.seq, other, u)
		}
		claimSeq[p.seq] = u
		if inPool[p.seq] {
			a.problem("packet %d is claimed by %q and still in the pool", p.seq, u)
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
