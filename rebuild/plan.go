package rebuild

import (
	"fmt"
	"sort"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// evidence is everything that survives of a campaign: the ledger's
// packets, grants and lost packets, and what the freeze found in each
// shard of the layout.
type evidence struct {
	shards int             // the layout
	cents  []int64         // the packets: packet seq s has cents[s-1]
	grants []ledger.Grant  // the ledger's (settled) grants
	lost   []int64         // Terms.Lost: packets an earlier rebuild found lost
	redis  []*shardReading // per shard, what the freeze found
	// opened says, by seq, which packets may have been popped: those of
	// the blocks the ledger recorded as opened (the durable pop
	// frontier), or every packet when the campaign had no frontier (nil).
	opened []bool
	// release puts the packets that would be quarantined back in the
	// pools (Config.ReleaseQuarantineRiskingDoubleGrants).
	release bool
}

// shardReading is one frozen shard's contents.
type shardReading = redisstore.ShardContents

// plan is the rebuilt campaign.
type plan struct {
	shards []shardPlan
	// lost lists the unrecoverable packets (seq order): each left a pool,
	// and no record names who holds it.
	lost      []int64
	lostCents int64
	// quarantined counts the packets held out because they may have been
	// popped (an opened block's) and no record places them; released
	// those that the operator's flag put back in the pools instead.
	quarantined, quarantinedCents int64
	released, releasedCents       int64
	// conflicts are records the plan did not follow, in words (at most
	// maxConflicts); nConflicts counts them all.
	conflicts  []string
	nConflicts int
	// counts of what the plan restores
	claims, toSettle, pool int64
}

// shardPlan is one shard as the rebuild writes it.
type shardPlan struct {
	img                        redisstore.ShardImage
	grantedCount, grantedCents int64
	poolCount, poolCents       int64
	lostCount, lostCents       int64
}

// maxConflicts bounds the conflicts listed in words (all are counted).
const maxConflicts = 100

// planner decides, packet by packet, where each goes: to the user a
// record names (a claim), to the pool, or, when it provably left a pool
// and no record names its holder, to the lost packets. Its memory is
// indexed by packet, as the audit's is.
type planner struct {
	ev        *evidence
	n         int64
	owner     []string // by seq: the user a record gives it to
	inLedger  []bool   // by seq: the owner's grant is in the ledger
	at        []int64  // by seq: the grant's time its grants-stream entry gives (ms), 0 when none
	gone      []bool   // by seq: some record says it left a pool
	goneUser  []string // by seq: a user such a record named
	located   []bool   // by seq: in a surviving pool or transfer
	lost      []bool   // by seq: unrecoverable
	held      map[string]int64
	conflicts []string
	nConflict int
}

// makePlan computes the rebuilt campaign from ev. It fails only when the
// evidence says that packets were granted without saying which: then no
// pool can be restored without a guess.
func makePlan(ev *evidence) (*plan, error) {
	n := int64(len(ev.cents))
	pl := &planner{
		ev: ev, n: n, owner: make([]string, n+1), inLedger: make([]bool, n+1), at: make([]int64, n+1), gone: make([]bool, n+1),
		goneUser: make([]string, n+1), located: make([]bool, n+1), lost: make([]bool, n+1), held: map[string]int64{},
	}
	pl.attribute()
	pl.locate()
	pl.orderProofs()
	if err := pl.countProofs(); err != nil {
		return nil, err
	}
	return pl.build(), nil
}

// conflict records a record the plan does not follow.
func (pl *planner) conflict(format string, a ...any) {
	pl.nConflict++
	if len(pl.conflicts) < maxConflicts {
		pl.conflicts = append(pl.conflicts, fmt.Sprintf(format, a...))
	}
}

// attribute gives packets to users from every record, the ledger first:
// money moved for its grants, so it wins any disagreement. Then each
// shard's claims, then its grants stream (a grant not yet settled).
func (pl *planner) attribute() {
	for _, g := range pl.ev.grants {
		pl.record("the ledger", g.User, g.Seq, g.Cents, true)
	}
	for k, r := range pl.ev.redis {
		src := fmt.Sprintf("the claims of shard %d", k)
		for _, u := range sortedKeys(r.Claims) {
			seq, cents, err := redisstore.ParseClaim(r.Claims[u])
			if err != nil {
				pl.conflict("%s: %q: %v", src, u, err)
				continue
			}
			pl.record(src, u, seq, cents, false)
		}
	}
	for k, r := range pl.ev.redis {
		src := fmt.Sprintf("the grants stream of shard %d", k)
		for _, g := range r.Grants {
			pl.record(src, g.User, g.Seq, g.Cents, false)
			if g.Seq >= 1 && g.Seq <= pl.n && pl.owner[g.Seq] == g.User {
				pl.at[g.Seq] = g.At
			}
		}
	}
}

// record follows one record of a grant, unless it contradicts the
// packets or an earlier record. Every record of a real packet is
// evidence that the packet left a pool, followed or not.
func (pl *planner) record(src, user string, seq, cents int64, ledgerGrant bool) {
	if seq < 1 || seq > pl.n || (pl.ev.cents[seq-1] != cents && !ledgerGrant) {
		pl.conflict("%s gives %q packet %d of %d cents, which is no packet of the campaign", src, user, seq, cents)
		return
	}
	if pl.ev.cents[seq-1] != cents {
		pl.conflict("%s gives %q packet %d of %d cents; the packet has %d (kept: money moved)", src, user, seq, cents, pl.ev.cents[seq-1])
	}
	pl.gone[seq] = true
	if pl.goneUser[seq] == "" {
		pl.goneUser[seq] = user
	}
	switch other, had := pl.held[user]; {
	case pl.owner[seq] == user:
		return
	case pl.owner[seq] != "":
		pl.conflict("%s gives packet %d to %q; it is %q's (kept)", src, seq, user, pl.owner[seq])
		return
	case had:
		pl.conflict("%s gives %q packet %d; %q holds packet %d (kept)", src, user, seq, user, other)
		return
	}
	pl.owner[seq], pl.inLedger[seq] = user, ledgerGrant
	pl.held[user] = seq
}

// locate marks the packets that sit in a surviving pool or in a transfer
// not yet applied, and the packets found lost before.
func (pl *planner) locate() {
	foundLost := map[int64]bool{}
	for _, seq := range pl.ev.lost {
		foundLost[seq] = true
		if seq >= 1 && seq <= pl.n {
			pl.gone[seq], pl.lost[seq] = true, pl.owner[seq] == ""
		}
	}
	for k, r := range pl.ev.redis {
		for _, p := range append(append([]string(nil), r.Pool...), r.Lost...) {
			if seq, ok := pl.packet(fmt.Sprintf("shard %d", k), p); ok {
				pl.located[seq] = true
			}
		}
		// The lost list holds the packets found lost (in the terms too)
		// and those quarantined, which are only located: a rebuild
		// decides again whether to hold them out.
		for _, p := range r.Lost {
			if seq, ok := pl.packet("", p); ok && foundLost[seq] {
				pl.gone[seq], pl.lost[seq] = true, pl.owner[seq] == ""
			}
		}
		for _, t := range r.Transfers {
			if t.Dest >= 0 && t.Dest < len(pl.ev.redis) && pl.ev.redis[t.Dest].Applied[t.ID] {
				continue // its packets are in the destination's pool
			}
			for _, p := range t.Packets {
				if seq, ok := pl.packet(fmt.Sprintf("transfer %s", t.ID), p); ok {
					pl.located[seq] = true
				}
			}
		}
	}
}

// packet reads a packet of a pool, a lost list or a transfer: one of the
// campaign's, with its amount. One that is not is a conflict.
func (pl *planner) packet(where, p string) (int64, bool) {
	seq, cents, err := redisstore.ParseClaim(p)
	if err == nil && seq <= pl.n && pl.ev.cents[seq-1] == cents {
		return seq, true
	}
	if where != "" {
		pl.conflict("%s holds %q, which is no packet of the campaign", where, p)
	}
	return 0, false
}

// sortedKeys returns m's keys in order, so a plan does not depend on map
// order.
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
