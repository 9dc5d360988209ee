package rebuild

import (
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// The proofs. A packet goes back to the pool unless something shows it
// was granted. A record that names its holder (the ledger, a claim, a
// stream entry) makes it a claim; the proofs below find the packets that
// left a pool although no record names who holds them, and keep them out
// of the pool as lost. They rest on how a pool changes: a grab takes
// packets from its tail, a transfer between shards from its head, and a
// transfer's packets join the destination at its tail.
//
//   - A surviving pool (listProof). Of the packets a pool held at the
//     moment it survived from, those granted later on that shard left from
//     the tail, one after the other; those lent to another shard left from
//     the head. So when a record shows packet p of the list granted to a
//     user of this shard, every packet after p in the list was granted
//     before p; and when a record shows p granted on another shard, every
//     packet before p was lent away, to a fate no surviving record tells.
//   - A one-shard campaign whose pool did not survive (initialOrderProof).
//     Its pool was loaded in seq order and a rebuild writes it so again,
//     below every packet it did not restore; grabs take the highest first.
//     So every packet from the lowest one any record names upwards left
//     the pool. Its counters, when they survived and no rebuild has
//     reordered it, say how many left.
//   - Every pool survived intact (countProofs): a packet that is in none
//     of them, in no transfer and in no record was granted, and its claim
//     was lost. Not after a rebuild cut short between its swaps: it dealt
//     packets to shards it did not reach, and those are back in the pool
//     (the packets it found lost are in the ledger's terms, written before
//     its first swap).
//
// What no proof reaches: a grant acknowledged on a shard whose state did
// not survive, after the last one the ledger holds. It left no record
// anywhere, so it cannot be counted and its user keeps no claim; but its
// packet was in a block the ledger records as opened (the durable pop
// frontier), so it is quarantined with the rest of that block nobody is
// known to hold, never handed out again (see quarantine). With WAIT
// (Config.WaitReplicas) a failover loses no acknowledged grant; a loss of
// every copy of the data (a FLUSHALL, all nodes gone) loses the grants
// not yet settled.

// listProof applies the surviving-pool proof to shard k's list.
func (pl *planner) listProof(k int, list []string) {
	tail, head := len(list), -1
	for i, p := range list {
		seq, ok := pl.packet("", p)
		if !ok || !pl.gone[seq] {
			continue
		}
		u := pl.owner[seq]
		if u == "" {
			u = pl.goneUser[seq]
		}
		if u == "" {
			continue // found lost before: no holder to place it by
		}
		if redisstore.HomeShard(u, pl.ev.shards) == k {
			tail = min(tail, i)
		} else {
			head = max(head, i)
		}
	}
	for i, p := range list {
		if i < tail && i > head {
			continue
		}
		if seq, ok := pl.packet("", p); ok && pl.owner[seq] == "" {
			pl.lost[seq] = true
		}
	}
}

// orderProofs applies the two order proofs.
func (pl *planner) orderProofs() {
	for k, r := range pl.ev.redis {
		if r.Found() && len(r.Pool) > 0 {
			pl.listProof(k, r.Pool)
		}
	}
	if pl.ev.shards == 1 && !pl.intact(0) {
		pl.initialOrderProof()
	}
}

// initialOrderProof: see the top of the file. It returns nothing: what it
// proves is marked lost.
func (pl *planner) initialOrderProof() {
	cut := pl.n + 1
	for seq := int64(1); seq <= pl.n; seq++ {
		if pl.gone[seq] {
			cut = seq
			break
		}
	}
	if r := pl.ev.redis[0]; r.Found() && r.Meta["rebuilt_at"] == "" {
		cut = min(cut, pl.n-r.Int("granted_count")+1)
	}
	for seq := max(cut, 1); seq <= pl.n; seq++ {
		if pl.owner[seq] == "" {
			pl.lost[seq] = true
		}
	}
}

// intact says whether shard k survived with a pool as long as its
// counters say.
func (pl *planner) intact(k int) bool {
	r := pl.ev.redis[k]
	if !r.Found() {
		return false
	}
	want := r.Int("base_count") + r.Int("in_count") - r.Int("out_count")
	if pl.ev.shards == 1 {
		want = r.Int("count")
	}
	want -= r.Int("granted_count") + r.Int("lost_count")
	return int64(len(r.Pool)) == want
}

// countProofs applies the proof of intact pools, or, when some pool did
// not survive, checks that no surviving counter speaks of grants the
// proofs could not place.
func (pl *planner) countProofs() error {
	all := true
	for k, r := range pl.ev.redis {
		all = all && pl.intact(k) && r.Meta["rebuild_swapped"] == ""
	}
	if all {
		for seq := int64(1); seq <= pl.n; seq++ {
			if pl.owner[seq] == "" && !pl.located[seq] {
				pl.lost[seq] = true
			}
		}
		return nil
	}
	for k, r := range pl.ev.redis {
		if !r.Found() {
			continue
		}
		missing := r.Int("granted_count") - int64(len(r.Claims))
		covered := pl.ev.shards == 1 && r.Meta["rebuilt_at"] == ""
		if missing > 0 && !covered {
			return fmt.Errorf("%w: shard %d counts %d grants more than its claims hold, and with pools lost too "+
				"nothing tells which packets they took", ErrUnknowable, k, missing)
		}
	}
	return nil
}

// build lays the plan out over the shards: each claim on its user's home
// shard, the pool dealt round the shards in seq order (each shard's list
// in seq order, so a later rebuild's proofs hold), the lost packets on
// the root.
func (pl *planner) build() *plan {
	s := pl.ev.shards
	p := &plan{shards: make([]shardPlan, s), conflicts: pl.conflicts, nConflicts: pl.nConflict}
	settle := make([][]string, s)
	dealt := 0
	for seq := int64(1); seq <= pl.n; seq++ {
		c := pl.ev.cents[seq-1]
		packet := redisstore.FormatPacket(seq, c)
		switch u := pl.owner[seq]; {
		case u != "":
			k := redisstore.HomeShard(u, s)
			sh := &p.shards[k]
			sh.img.Claims = append(sh.img.Claims, u, packet)
			sh.grantedCount++
			sh.grantedCents += c
			p.claims++
			if !pl.inLedger[seq] {
				// Settled later than granted: the entry carries the
				// grant's time when its old entry told it.
				settled := packet
				if pl.at[seq] > 0 {
					settled = redisstore.FormatTimedPacket(seq, c, pl.at[seq])
				}
				settle[k] = append(settle[k], u, settled)
				p.toSettle++
			}
		case pl.lost[seq]:
			p.holdOut(packet, c)
			p.lost = append(p.lost, seq)
			p.lostCents += c
		case pl.quarantine(seq) && !pl.ev.release:
			p.holdOut(packet, c)
			p.quarantined++
			p.quarantinedCents += c
		default:
			if pl.quarantine(seq) {
				p.released++
				p.releasedCents += c
			}
			sh := &p.shards[dealt%s]
			sh.img.Pool = append(sh.img.Pool, packet)
			sh.poolCount++
			sh.poolCents += c
			dealt++
			p.pool++
		}
	}
	for k, pairs := range settle {
		p.shards[k].img.Grants = entries(pairs)
	}
	return p
}

// quarantine says whether packet seq, which no record places and no
// proof shows lost, may still have been popped: it is in a block the
// ledger recorded as opened (or the campaign had no frontier). Such a
// packet may have been acknowledged to a user whose grant left no
// record (a grab after the last state that survived); handed out again,
// it would be granted twice. So it is held out, and refunded with the
// campaign, unless the operator releases it.
func (pl *planner) quarantine(seq int64) bool {
	return pl.ev.opened == nil || pl.ev.opened[seq]
}

// holdOut keeps a packet out of the pools, on the root's lost list:
// conservation, the audit, reconcile and the refund count it there.
func (p *plan) holdOut(packet string, cents int64) {
	sh := &p.shards[0]
	sh.img.Lost = append(sh.img.Lost, packet)
	sh.lostCount++
	sh.lostCents += cents
}

// grantsPerEntry is how many grants one restored stream entry holds, as
// a grab batch's entry does.
const grantsPerEntry = 500

// entries cuts user, packet pairs into stream entries.
func entries(pairs []string) [][]string {
	var out [][]string
	for len(pairs) > 2*grantsPerEntry {
		out = append(out, pairs[:2*grantsPerEntry])
		pairs = pairs[2*grantsPerEntry:]
	}
	if len(pairs) > 0 {
		out = append(out, pairs)
	}
	return out
}
