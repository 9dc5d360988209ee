package history

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Anomaly kinds Check reports.
const (
	NotLinearizable = "not-linearizable"   // a register's calls fit no sequential order
	Undecided       = "undecided"          // porcupine ran out of time on a register
	Unresolved      = "unresolved-unknown" // an Unknown call no later answer resolves
	ToldTwo         = "told-two-packets"   // a user was told of two packets
	PacketTwice     = "packet-twice"       // a packet reached two users (told, claimed or paid)
	NotHeld         = "told-not-held"      // told of a packet Redis does not hold as the user's claim
	NotPaid         = "told-not-paid"      // told of a packet the ledger did not pay the user
	Untold          = "held-untold"        // a claim or a grant nobody was told of
	LedgerRedis     = "ledger-not-redis"   // the ledger's grants and Redis's claims differ
	Sum             = "sum"                // the cents do not add up
	Balance         = "balance"            // a user's balance is not what the ledger paid them
	DiscountLost    = "confirmed-not-paid" // a discount told confirmed is not in the ledger as told
	DiscountTwice   = "discount-twice"     // an order or a unit confirmed twice in the ledger
	DiscountUntold  = "paid-untold"        // a confirmed discount in the ledger nobody was told of
	Limit           = "limit"              // budget, quota, per-user, max or order amount exceeded
)

// Anomaly is one thing Check found wrong.
type Anomaly struct {
	Kind   string
	Key    string // what it is about: a campaign, a user, an order, a packet
	Detail string
}

func (a Anomaly) String() string { return a.Kind + " " + a.Key + ": " + a.Detail }

// Packet is a packet as Redis or the ledger holds it.
type Packet struct {
	Seq   int64
	Cents int64
}

// Grant is a packet paid to a user in the ledger.
type Grant struct {
	User  string
	Seq   int64
	Cents int64
}

// Campaign is a red packet campaign as Redis and the ledger hold it at
// the end of a test.
type Campaign struct {
	ID    string
	Total int64 // the cents it was created with
	// Claims are Redis's claims, user -> packet, read from the current
	// primary of every shard.
	Claims map[string]Packet
	// Grants are the ledger's grants of the campaign.
	Grants []Grant
	// Funded, Refunded and Quarantined are the ledger's totals: Funded
	// must be Total and equal the grants + Refunded + Quarantined once
	// Settled.
	Funded, Refunded, Quarantined int64
	Settled                       bool
}

// Discount is a confirmed discount in the ledger.
type Discount struct {
	User  string
	Order string
	Seq   int64
	Cents int64
}

// DiscountCampaign is a discount campaign as Redis and the ledger hold it
// at the end of a test.
type DiscountCampaign struct {
	ID                           string
	Budget, Quota                int64
	Max                          int64
	PerUserCount                 int64 // 0: no limit
	PerUserAmount                int64 // 0: no limit
	Confirmed                    []Discount
	Funded, Refunded             int64
	Settled                      bool
	RedisConfirmed, RedisSumConf int64 // Redis's confirmed count and cents; -1 when not read
}

// Final is what Redis and the ledger hold at the end of a test.
type Final struct {
	Packets   []Campaign
	Discounts []DiscountCampaign
	// Balances are the ledger balances of the users' accounts ("user:<id>"
	// without the prefix), for every user of the history; nil skips the
	// check.
	Balances map[string]int64
}

// Report is what Check found.
type Report struct {
	Ops, Unknown, Resolved int
	Anomalies              []Anomaly
}

// OK reports whether Check found nothing wrong.
func (r Report) OK() bool { return len(r.Anomalies) == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations, %d unknown (%d resolved), %d anomalies", r.Ops, r.Unknown, r.Resolved, len(r.Anomalies))
	kinds := map[string]int{}
	for _, a := range r.Anomalies {
		kinds[a.Kind]++
	}
	for i, k := range sortedKeys(kinds) {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%d %s", sep, kinds[k], k)
	}
	for i, a := range r.Anomalies {
		if i == 50 {
			fmt.Fprintf(&b, "\n  ... %d more", len(r.Anomalies)-i)
			break
		}
		b.WriteString("\n  " + a.String())
	}
	return b.String()
}

// Check checks a history against the final state (see the package doc).
// timeout bounds porcupine's search on each register.
func Check(ops []Op, f Final, timeout time.Duration) Report {
	rep := Report{Ops: len(ops)}
	rep.Anomalies = append(rep.Anomalies, linearizable(ops, timeout)...)
	unknown, resolved, unres := resolution(ops)
	rep.Unknown, rep.Resolved = unknown, resolved
	rep.Anomalies = append(rep.Anomalies, unres...)
	open := map[string]bool{} // registers with an unresolved Unknown
	for _, a := range unres {
		open[a.Key] = true
	}
	paid := map[string]int64{}
	for _, c := range f.Packets {
		rep.Anomalies = append(rep.Anomalies, checkPackets(ops, c, open, paid)...)
	}
	for _, d := range f.Discounts {
		rep.Anomalies = append(rep.Anomalies, checkDiscounts(ops, d, open, paid)...)
	}
	if f.Balances != nil {
		rep.Anomalies = append(rep.Anomalies, checkBalances(f.Balances, paid)...)
	}
	return rep
}

// resolution finds every Unknown call and whether a later call with an
// answer (OK) on the same register resolves it.
func resolution(ops []Op) (unknown, resolved int, out []Anomaly) {
	lastOK := map[string]time.Duration{}
	for _, op := range ops {
		if op.Result == OK {
			lastOK[registerKey(op)] = max(lastOK[registerKey(op)], op.Start)
		}
	}
	reported := map[string]bool{}
	for _, op := range ops {
		if op.Result != Unknown {
			continue
		}
		unknown++
		k := registerKey(op)
		if t, ok := lastOK[k]; ok && t > op.Start {
			resolved++
			continue
		}
		if !reported[k] {
			reported[k] = true
			out = append(out, Anomaly{Kind: Unresolved, Key: k,
				Detail: fmt.Sprintf("%s at %v (%s) and no later answer", op.Kind, op.Start, op.Note)})
		}
	}
	return unknown, resolved, out
}

// told returns, for a campaign, the packet each user was told of
// (GRANTED, ALREADY or GET grants/me), and the anomalies of users told of
// two and packets told to two users.
func told(ops []Op, campaign string) (map[string]Packet, []Anomaly) {
	byUser := map[string]Packet{}
	byPacket := map[int64]string{}
	var out []Anomaly
	reported := map[string]bool{}
	report := func(a Anomaly) {
		if !reported[a.Kind+a.Key] {
			reported[a.Kind+a.Key] = true
			out = append(out, a)
		}
	}
	for _, op := range ops {
		if op.Campaign != campaign || op.Result != OK || op.Packet == "" || (op.Kind != Grab && op.Kind != Held) {
			continue
		}
		seq, err := packetSeq(campaign, op.Packet)
		if err != nil {
			out = append(out, Anomaly{Kind: ToldTwo, Key: op.User, Detail: err.Error()})
			continue
		}
		p := Packet{Seq: seq, Cents: op.Cents}
		if before, ok := byUser[op.User]; ok && before != p {
			report(Anomaly{Kind: ToldTwo, Key: campaign + " " + op.User,
				Detail: fmt.Sprintf("told of %d (%d cents), then of %d (%d cents)", before.Seq, before.Cents, p.Seq, p.Cents)})
			continue
		}
		byUser[op.User] = p
		if other, ok := byPacket[seq]; ok && other != op.User {
			report(Anomaly{Kind: PacketTwice, Key: fmt.Sprintf("%s/%d", campaign, seq),
				Detail: fmt.Sprintf("told to %s and to %s", other, op.User)})
			continue
		}
		byPacket[seq] = op.User
	}
	return byUser, out
}

func packetSeq(campaign, packet string) (int64, error) {
	s, ok := strings.CutPrefix(packet, campaign+"/")
	seq, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || seq < 1 {
		return 0, fmt.Errorf("packet id %q is not of campaign %s", packet, campaign)
	}
	return seq, nil
}
