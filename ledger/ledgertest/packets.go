package ledgertest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// BenchPackets measures recording the packets of a campaign of 1,000,000
// packets, as a create does before the campaign goes live, and reports
// packets/s. Each iteration is a new campaign.
func BenchPackets(b *testing.B, l ledger.Ledger) {
	const n = 1_000_000
	cents := amounts(n, rand.Uint64())
	prefix := fmt.Sprintf("bench-packets-%x", rand.Uint64())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.WritePackets(ctx, fmt.Sprintf("%s-%d", prefix, i), cents); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "packets/s")
}

// amounts returns n packet amounts between 1 and 997 cents, drawn from
// seed.
func amounts(n int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 0x68626c67))
	cents := make([]int64, n)
	for i := range cents {
		cents[i] = 1 + r.Int64N(997)
	}
	return cents
}

func sum(cents []int64) int64 {
	var s int64
	for _, c := range cents {
		s += c
	}
	return s
}

// packetsOf is what WritePackets(cents) records: seq i+1 holds cents[i].
func packetsOf(cents []int64) []ledger.Packet {
	ps := make([]ledger.Packet, len(cents))
	for i, c := range cents {
		ps[i] = ledger.Packet{Seq: int64(i + 1), Cents: c}
	}
	return ps
}

func readPackets(t *testing.T, l ledger.Ledger, campaign string) []ledger.Packet {
	t.Helper()
	var ps []ledger.Packet
	require.NoError(t, l.Packets(ctx, campaign, func(p ledger.Packet) error { ps = append(ps, p); return nil }))
	return ps
}

func readUngranted(t *testing.T, l ledger.Ledger, campaign string) []ledger.Packet {
	t.Helper()
	var ps []ledger.Packet
	require.NoError(t, l.UngrantedPackets(ctx, campaign, func(p ledger.Packet) error { ps = append(ps, p); return nil }))
	return ps
}

func totals(t *testing.T, l ledger.Ledger, campaign string) ledger.Totals {
	t.Helper()
	tot, err := l.Totals(ctx, campaign)
	require.NoError(t, err)
	return tot
}

// requireConflict checks that err is a conflict over campaign's
// entry ("packets", "fund", "refund").
func requireConflict(t *testing.T, err error, entry, campaign string) {
	t.Helper()
	ce := requireAs[*ledger.ConflictError](t, err, ledger.ErrConflict)
	require.Equal(t, entry, ce.Entry)
	require.Equal(t, campaign, ce.Campaign)
}

func testPacketsIdempotent(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cents := []int64{5, 1, 7, 3}
	require.NoError(t, l.WritePackets(ctx, "c", cents), "packets need no fund entry")
	require.NoError(t, l.WritePackets(ctx, "c", []int64{5, 1, 7, 3}), "a replay is a no-op")
	want := totals(t, l, "c")
	require.Equal(t, ledger.Totals{PacketCount: 4, PacketCents: 16}, want)
	require.Equal(t, packetsOf(cents), readPackets(t, l, "c"))

	for _, tc := range []struct {
		name  string
		cents []int64
	}{
		{"another amount", []int64{5, 1, 7, 4}},
		{"fewer packets", []int64{5, 1, 7}},
		{"more packets", []int64{5, 1, 7, 3, 1}},
		{"same amounts, other order", []int64{1, 5, 7, 3}},
		{"same count and sum", []int64{5, 2, 6, 3}},
	} {
		requireConflict(t, l.WritePackets(ctx, "c", tc.cents), "packets", "c")
		require.Equal(t, packetsOf(cents), readPackets(t, l, "c"), "%s changed nothing", tc.name)
		require.Equal(t, want, totals(t, l, "c"), tc.name)
	}
	require.NoError(t, l.WritePackets(ctx, "c", cents), "the stored packets still replay")
}

// testPacketsFund: packets and fund entry must agree to the cent,
// whichever is written first; the second one to disagree is refused and
// writes nothing.
func testPacketsFund(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "f", 100)
	requireConflict(t, l.WritePackets(ctx, "f", []int64{50, 49}), "packets", "f")
	require.ErrorIs(t, l.Packets(ctx, "f", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets,
		"a refused set writes no packet")
	require.NoError(t, l.WritePackets(ctx, "f", []int64{50, 50}))
	fund(t, l, "f", 100) // a fund replay still passes
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", Escrow: 100, PacketCount: 2, PacketCents: 100}, totals(t, l, "f"))

	require.NoError(t, l.WritePackets(ctx, "p", []int64{20, 30}))
	requireConflict(t, l.Fund(ctx, ledger.Campaign{ID: "p", Funding: "ops", Total: 49}), "fund", "p")
	require.Equal(t, ledger.Totals{PacketCount: 2, PacketCents: 50}, totals(t, l, "p"), "a refused fund entry writes nothing")
	require.Equal(t, map[string]int64{"escrow:p": 0, "funding:ops": -100}, balances(t, l, "escrow:p", "funding:ops"))
	fund(t, l, "p", 50)
	require.Equal(t, int64(50), totals(t, l, "p").Funded)
}

func testPacketsInvalid(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	for _, tc := range []struct {
		name     string
		campaign string
		cents    []int64
	}{
		{"no campaign", "", []int64{1}},
		{"nil", "c", nil},
		{"empty", "c", []int64{}},
		{"zero cents", "c", []int64{1, 0, 1}},
		{"negative cents", "c", []int64{-1}},
		{"sum overflows", "c", []int64{math.MaxInt64, 1}},
	} {
		require.ErrorIs(t, l.WritePackets(ctx, tc.campaign, tc.cents), ledger.ErrInvalid, tc.name)
	}
	require.ErrorIs(t, l.Packets(ctx, "c", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets)
	require.Equal(t, ledger.Totals{}, totals(t, l, "c"))
}

// testPacketsNotRecorded: a campaign without packets (created before the
// ledger kept them) answers ErrNoPackets, never an empty pool.
func testPacketsNotRecorded(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	fund(t, l, "old", 100)
	apply(t, l, "old", g("old", 1, "a", 10))
	require.ErrorIs(t, l.Packets(ctx, "old", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets)
	require.ErrorIs(t, l.UngrantedPackets(ctx, "old", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets)
	require.ErrorIs(t, l.MismatchedGrants(ctx, "old", func(ledger.Mismatch) error { return nil }), ledger.ErrNoPackets)
	require.ErrorIs(t, l.UngrantedPackets(ctx, "never", func(ledger.Packet) error { return nil }), ledger.ErrNoPackets)
	tot := totals(t, l, "old")
	require.Zero(t, tot.PacketCount)
	require.Zero(t, tot.PacketCents)
}

func testPacketsOrder(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	a, b := amounts(3000, 1), amounts(2000, 2)
	require.NoError(t, l.WritePackets(ctx, "b", b))
	require.NoError(t, l.WritePackets(ctx, "a", a))
	require.Equal(t, packetsOf(a), readPackets(t, l, "a"))
	require.Equal(t, packetsOf(b), readPackets(t, l, "b"))

	stop := errors.New("stop")
	for name, read := range map[string]func(func(ledger.Packet) error) error{
		"Packets":          func(fn func(ledger.Packet) error) error { return l.Packets(ctx, "a", fn) },
		"UngrantedPackets": func(fn func(ledger.Packet) error) error { return l.UngrantedPackets(ctx, "a", fn) },
	} {
		calls := 0
		require.ErrorIs(t, read(func(ledger.Packet) error { calls++; return stop }), stop, name)
		require.Equal(t, 1, calls, "%s: an error from fn stops the iteration", name)
	}
}

// testPacketsLarge writes a campaign of largePackets packets (200,000),
// reads it back streaming, replays it, and reads the ungranted ones once
// some are granted.
func testPacketsLarge(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const n = largePackets
	cents := amounts(n, 3)
	total := sum(cents)
	require.NoError(t, l.WritePackets(ctx, "big", cents))
	require.NoError(t, l.WritePackets(ctx, "big", cents))
	require.Equal(t, ledger.Totals{PacketCount: n, PacketCents: total}, totals(t, l, "big"))
	i := 0
	require.NoError(t, l.Packets(ctx, "big", func(p ledger.Packet) error {
		if p != (ledger.Packet{Seq: int64(i + 1), Cents: cents[i]}) {
			return fmt.Errorf("packet %d: %+v, want seq %d cents %d", i, p, i+1, cents[i])
		}
		i++
		return nil
	}))
	require.Equal(t, n, i)

	fund(t, l, "big", total)
	var grants []ledger.Grant
	for seq := int64(7); seq <= n; seq += 200 {
		grants = append(grants, g("big", seq, fmt.Sprintf("u%d", seq), cents[seq-1]))
	}
	res := apply(t, l, "big", grants...)
	require.Equal(t, len(grants), res.Inserted)
	var count, free int64
	last := int64(0)
	require.NoError(t, l.UngrantedPackets(ctx, "big", func(p ledger.Packet) error {
		if p.Seq <= last || p.Seq%200 == 7 || p.Cents != cents[p.Seq-1] {
			return fmt.Errorf("ungranted packet %+v after seq %d", p, last)
		}
		last = p.Seq
		count++
		free += p.Cents
		return nil
	}))
	require.Equal(t, int64(n-len(grants)), count)
	require.Equal(t, total-res.InsertedCents, free, "conservation: ungranted + granted = packets = fund")
	require.NoError(t, l.MismatchedGrants(ctx, "big", func(m ledger.Mismatch) error {
		return fmt.Errorf("unexpected mismatch %+v", m)
	}))
}

// testUngrantedPackets: the packets no grant holds, with grants of
// another campaign on the same seqs that must not count.
func testUngrantedPackets(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	cents := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []string{"c", "d"} {
		require.NoError(t, l.WritePackets(ctx, c, cents))
	}
	require.Equal(t, packetsOf(cents), readUngranted(t, l, "c"), "not funded yet: no grant, every packet is free")
	fund(t, l, "c", 55)
	fund(t, l, "d", 55)
	for seq := int64(1); seq <= 10; seq++ {
		apply(t, l, "d", g("d", seq, fmt.Sprintf("d%d", seq), seq))
	}
	apply(t, l, "c", g("c", 2, "a", 2), g("c", 10, "b", 10), g("c", 5, "e", 5))
	ps := packetsOf(cents)
	require.Equal(t, []ledger.Packet{ps[0], ps[2], ps[3], ps[5], ps[6], ps[7], ps[8]}, readUngranted(t, l, "c"))
	require.Empty(t, readUngranted(t, l, "d"), "all granted: no packet free, and no error")
}

// testMismatchedGrants: grants whose seq is no packet, or whose amount is
// not the packet's, are reported in seq order.
func testMismatchedGrants(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	require.NoError(t, l.WritePackets(ctx, "c", []int64{10, 20, 30}))
	fund(t, l, "c", 60)
	apply(t, l, "c", g("c", 7, "x", 5), g("c", 1, "a", 10), g("c", 2, "b", 25), g("c", 0, "z", 1))
	// Another campaign's grant on a seq of c's, with c's amount, must not
	// hide c's mismatch on that seq.
	fund(t, l, "o", 100)
	apply(t, l, "o", g("o", 2, "o", 20))
	var got []ledger.Mismatch
	require.NoError(t, l.MismatchedGrants(ctx, "c", func(m ledger.Mismatch) error { got = append(got, m); return nil }))
	require.Equal(t, []ledger.Mismatch{
		{Grant: g("c", 0, "z", 1), Packet: ledger.Packet{Seq: 0}},
		{Grant: g("c", 2, "b", 25), Packet: ledger.Packet{Seq: 2, Cents: 20}},
		{Grant: g("c", 7, "x", 5), Packet: ledger.Packet{Seq: 7}},
	}, got)
	stop := errors.New("stop")
	calls := 0
	require.ErrorIs(t, l.MismatchedGrants(ctx, "c", func(ledger.Mismatch) error { calls++; return stop }), stop)
	require.Equal(t, 1, calls)
}

// testPacketsConcurrent races writers of one campaign: retries of the
// same create and a create with other packets. One set wins whole; every
// writer of it succeeds, every other writer gets a conflict.
func testPacketsConcurrent(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	sets := [][]int64{amounts(5000, 4), amounts(5000, 5)}
	const perSet = 4
	errs := make([][]error, len(sets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for s := range sets {
		errs[s] = make([]error, perSet)
		for w := range perSet {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[s][w] = l.WritePackets(ctx, "c", sets[s])
			}()
		}
	}
	close(start)
	wg.Wait()
	won := 0
	if errs[0][0] != nil {
		won = 1
	}
	for s := range sets {
		for w, err := range errs[s] {
			if s == won {
				require.NoError(t, err, "writer %d of the stored set", w)
			} else {
				require.ErrorIs(t, err, ledger.ErrConflict, "writer %d of the other set", w)
			}
		}
	}
	require.Equal(t, packetsOf(sets[won]), readPackets(t, l, "c"))
	require.Equal(t, ledger.Totals{PacketCount: 5000, PacketCents: sum(sets[won])}, totals(t, l, "c"))
}

// testPacketsFundRace races Fund and WritePackets of campaigns whose
// total and packets disagree: whichever commits first, the other must
// see it and refuse, so no campaign ends up with both.
func testPacketsFundRace(t *testing.T, open func(t *testing.T) ledger.Ledger) {
	l := open(t)
	const campaigns = 20
	fundErrs, packetErrs := make([]error, campaigns), make([]error, campaigns)
	var wg sync.WaitGroup
	for i := range campaigns {
		id := fmt.Sprintf("c%d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			fundErrs[i] = l.Fund(ctx, ledger.Campaign{ID: id, Funding: "ops", Total: 100})
		}()
		go func() {
			defer wg.Done()
			packetErrs[i] = l.WritePackets(ctx, id, []int64{60, 39})
		}()
	}
	wg.Wait()
	for i := range campaigns {
		id := fmt.Sprintf("c%d", i)
		tot := totals(t, l, id)
		if fundErrs[i] == nil {
			require.ErrorIs(t, packetErrs[i], ledger.ErrConflict, id)
			require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", Escrow: 100}, tot, id)
		} else {
			require.ErrorIs(t, fundErrs[i], ledger.ErrConflict, id)
			require.NoError(t, packetErrs[i], id)
			require.Equal(t, ledger.Totals{PacketCount: 2, PacketCents: 99}, tot, id)
		}
	}
}
