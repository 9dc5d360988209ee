package history

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// op builds an Op: start and end in ms, end < 0 for an Unknown call.
func op(kind Kind, camp, user string, start, end int, outcome, packet string, cents int64) Op {
	o := Op{Kind: kind, Campaign: camp, User: user, Start: ms(start), End: ms(end), Result: OK, Outcome: outcome, Packet: packet, Cents: cents}
	if end < 0 {
		o.Result, o.End, o.Outcome = Unknown, 0, ""
	}
	return o
}

func order(kind Kind, user, ord string, start, end int, outcome string, cents int64) Op {
	o := op(kind, "d1", user, start, end, outcome, "", cents)
	o.Order = ord
	if kind == Reserve {
		o.OrderCents = 1000
	}
	return o
}

// good is a history with every kind of call and Unknown calls resolved
// both ways, and the state that goes with it: Check finds nothing.
func good() ([]Op, Final) {
	ops := []Op{
		op(Grab, "c1", "u1", 0, 10, "granted", "c1/1", 100),
		op(Grab, "c1", "u1", 5, 12, "already_granted", "c1/1", 100), // a double click
		op(Grab, "c1", "u2", 1, -1, "", "", 0),                      // unknown: it granted
		op(Held, "c1", "u2", 20, 21, "held", "c1/2", 200),
		op(Grab, "c1", "u3", 2, -1, "", "", 0), // unknown: it did nothing
		op(Held, "c1", "u3", 20, 22, NoGrant, "", 0),
		op(Grab, "c1", "u4", 3, 8, "sold_out", "", 0),
		op(Grab, "c1", "u5", 3, 8, "", "", 0), // refused before it ran
		order(Reserve, "u1", "o1", 0, 5, "reserved", 300),
		order(Confirm, "u1", "o1", 6, -1, "", 0),
		order(Confirm, "u1", "o1", 10, 11, "confirmed", 300),
		order(Reserve, "u2", "o2", 0, -1, "", 0),
		order(Reserve, "u2", "o2", 10, 12, "already", 200),
		order(Cancel, "u2", "o2", 13, 14, "cancelled", 0),
		order(Confirm, "u2", "o2", 15, 16, "cancelled", 0),
		order(Reserve, "u3", "o3", 1, 2, "limit", 0),
	}
	ops[7].Result = Fail
	f := Final{
		Packets: []Campaign{{
			ID: "c1", Total: 350, Funded: 350, Refunded: 50, Settled: true,
			Claims: map[string]Packet{"u1": {1, 100}, "u2": {2, 200}},
			Grants: []Grant{{"u1", 1, 100}, {"u2", 2, 200}},
		}},
		Discounts: []DiscountCampaign{{
			ID: "d1", Budget: 1000, Quota: 10, Max: 500, PerUserCount: 2, PerUserAmount: 600,
			Confirmed: []Discount{{"u1", "o1", 1, 300}}, Funded: 1000, Refunded: 700, Settled: true,
			RedisConfirmed: 1, RedisSumConf: 300,
		}},
		Balances: map[string]int64{"u1": 400, "u2": 200},
	}
	return ops, f
}

func TestCheckGoodHistory(t *testing.T) {
	ops, f := good()
	rep := Check(ops, f, 10*time.Second)
	require.True(t, rep.OK(), "%s", rep)
	require.Equal(t, 16, rep.Ops)
	require.Equal(t, 4, rep.Unknown)
	require.Equal(t, 4, rep.Resolved)
}

// TestCheckFindsAnomalies: each hand-made bad history is reported, with
// the kind of anomaly it holds.
func TestCheckFindsAnomalies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(ops []Op, f *Final) []Op
		kinds  []string
	}{
		{"a user told two different packets", func(ops []Op, f *Final) []Op {
			return append(ops, op(Held, "c1", "u1", 30, 31, "held", "c1/3", 50))
		}, []string{NotLinearizable, ToldTwo}},
		{"a packet told to two users", func(ops []Op, f *Final) []Op {
			ops[6] = op(Grab, "c1", "u4", 3, 8, "granted", "c1/1", 100)
			return ops
		}, []string{PacketTwice}},
		{"a packet claimed by two users", func(ops []Op, f *Final) []Op {
			f.Packets[0].Claims["u2"] = Packet{1, 100}
			return ops
		}, []string{PacketTwice}},
		{"a packet paid to two users", func(ops []Op, f *Final) []Op {
			f.Packets[0].Grants[1] = Grant{"u2", 1, 100}
			return ops
		}, []string{PacketTwice}},
		{"the sum off by a cent", func(ops []Op, f *Final) []Op {
			f.Packets[0].Refunded = 49
			return ops
		}, []string{Sum}},
		{"the discount sum off by a cent", func(ops []Op, f *Final) []Op {
			f.Discounts[0].Refunded = 701
			return ops
		}, []string{Sum}},
		{"an unresolved unknown", func(ops []Op, f *Final) []Op {
			return append(ops[:5], ops[6:]...) // u3's read is gone
		}, []string{Unresolved}},
		{"an unresolved unknown confirm", func(ops []Op, f *Final) []Op {
			return append(ops[:10], ops[11:]...)
		}, []string{Unresolved}},
		{"GRANTED twice, the same packet", func(ops []Op, f *Final) []Op {
			ops[1].Outcome = "granted"
			return ops
		}, []string{NotLinearizable}},
		{"a grant read back as none", func(ops []Op, f *Final) []Op {
			return append(ops, op(Held, "c1", "u1", 30, 31, NoGrant, "", 0))
		}, []string{NotLinearizable}},
		{"an acknowledged grant lost from Redis and the ledger", func(ops []Op, f *Final) []Op {
			delete(f.Packets[0].Claims, "u1")
			f.Packets[0].Grants = f.Packets[0].Grants[1:]
			f.Packets[0].Refunded = 150
			f.Balances["u1"] = 300
			return ops
		}, []string{NotHeld, NotPaid}},
		{"a claim nobody was told of", func(ops []Op, f *Final) []Op {
			f.Packets[0].Claims["u4"] = Packet{3, 50}
			return ops
		}, []string{Untold}},
		{"the ledger and Redis disagree", func(ops []Op, f *Final) []Op {
			f.Packets[0].Grants[1].Cents = 201
			f.Packets[0].Refunded = 49
			f.Balances["u2"] = 201
			return ops
		}, []string{NotPaid, LedgerRedis}},
		{"a confirmed discount missing from the ledger", func(ops []Op, f *Final) []Op {
			f.Discounts[0].Confirmed = nil
			f.Discounts[0].Refunded = 1000
			f.Discounts[0].RedisConfirmed, f.Discounts[0].RedisSumConf = 0, 0
			f.Balances["u1"] = 100
			return ops
		}, []string{DiscountLost}},
		{"a cancelled discount in the ledger", func(ops []Op, f *Final) []Op {
			d := &f.Discounts[0]
			d.Confirmed = append(d.Confirmed, Discount{"u2", "o2", 2, 200})
			d.Refunded, d.RedisConfirmed, d.RedisSumConf = 500, 2, 500
			f.Balances["u2"] = 400
			return ops
		}, []string{DiscountUntold}},
		{"an order confirmed twice", func(ops []Op, f *Final) []Op {
			d := &f.Discounts[0]
			d.Confirmed = append(d.Confirmed, Discount{"u1", "o1", 2, 300})
			d.Refunded, d.RedisConfirmed, d.RedisSumConf = 400, 2, 600
			f.Balances["u1"] = 700
			return ops
		}, []string{DiscountTwice}},
		{"over the per-user amount", func(ops []Op, f *Final) []Op {
			f.Discounts[0].PerUserAmount = 299
			return ops
		}, []string{Limit}},
		{"a confirm answered for a cancelled order", func(ops []Op, f *Final) []Op {
			return append(ops, order(Confirm, "u2", "o2", 20, 21, "confirmed", 200))
		}, []string{NotLinearizable}},
		{"a reservation told, then gone, behind many unknown confirms", func(ops []Op, f *Final) []Op {
			ops = append(ops, order(Reserve, "u4", "o4", 30, 31, "reserved", 100))
			for i := range 60 {
				ops = append(ops, order(Confirm, "u4", "o4", 32+i, -1, "", 0))
			}
			return append(ops, order(Confirm, "u4", "o4", 100, 101, NoReservation, 0))
		}, []string{NotLinearizable}},
		{"a balance off by a cent", func(ops []Op, f *Final) []Op {
			f.Balances["u2"] = 199
			return ops
		}, []string{Balance}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, f := good()
			ops = tc.break_(ops, &f)
			rep := Check(ops, f, 10*time.Second)
			require.False(t, rep.OK())
			var kinds []string
			for _, a := range rep.Anomalies {
				kinds = append(kinds, a.Kind)
			}
			for _, k := range tc.kinds {
				require.Contains(t, kinds, k, "%s", rep)
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := r.Now()
			r.Add(Op{Client: i, Kind: Held, Campaign: "c", User: "u", Start: start, End: r.Now(), Result: OK, Outcome: NoGrant})
		}()
	}
	wg.Wait()
	ops := r.Ops()
	require.Len(t, ops, 8)
	for i := 1; i < len(ops); i++ {
		require.LessOrEqual(t, ops[i-1].Start, ops[i].Start)
	}
	require.Equal(t, map[Result]int{OK: 8}, Counts(ops))
	require.True(t, Check(ops, Final{}, time.Second).OK())
}
