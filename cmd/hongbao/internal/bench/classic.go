package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ClassicScript is the classic grab, reproduced as the baseline: the pool
// is a list of JSON packets, a grab is one EVAL of this text (never
// EVALSHA), and the user id travels as a key.
//
//	KEYS[1] pool list   KEYS[2] consumed list   KEYS[3] dedupe hash   KEYS[4] user id
//	Reply   the packet as JSON with userId added, or nil when the user has
//	        grabbed before or the pool is empty
const ClassicScript = `if redis.call('hexists', KEYS[3], KEYS[4]) ~= 0 then
  return nil
else
  local packet = redis.call('rpop', KEYS[1])
  if packet then
    local x = cjson.decode(packet)
    x['userId'] = KEYS[4]
    local re = cjson.encode(x)
    redis.call('hset', KEYS[3], KEYS[4], KEYS[4])
    redis.call('lpush', KEYS[2], re)
    return re
  end
end
return nil
`

// classicPacket is one element of the classic lists.
type classicPacket struct {
	ID     int64  `json:"id"`
	Money  int64  `json:"money"`
	UserID string `json:"userId,omitempty"`
}

type classicKeys struct{ pool, consumed, dedupe string }

func newClassicKeys(runID string) classicKeys {
	p := "bench:classic:" + runID + ":"
	return classicKeys{pool: p + "pool", consumed: p + "consumed", dedupe: p + "dedupe"}
}

// runClassic runs one classic measurement: it loads the packets as the JSON
// pool, then Concurrency workers, each on its own connection with one
// blocking EVAL per grab, walk their own range of users until the pool is
// empty.
func runClassic(ctx context.Context, t *target, o Options, amounts []int64, label string) (*runStats, error) {
	k := newClassicKeys(t.runID)
	t.drop(k.pool, k.consumed, k.dedupe)
	if t.shared {
		defer t.drop(k.pool, k.consumed, k.dedupe)
	}
	if err := loadClassic(ctx, t, k, amounts, o.progress("loading", int64(len(amounts)))); err != nil {
		return nil, err
	}
	rs := &runStats{}
	var err error
	if rs.pooledBytes, err = t.memoryUsage(ctx, k.pool); err != nil {
		return nil, err
	}
	// Connections are opened before the clock starts.
	conns, err := dialClassic(t, o.Concurrency)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)

	p := newPhase(o, amounts, label, int64(min(o.Users, o.Packets)))
	p.spawn(func(w, from, to int) { p.classicWorker(conns[w], k, w, from, to) })
	// The workers block in reads, not on ctx: an interrupt unblocks them.
	stopWatch := context.AfterFunc(ctx, func() {
		p.stopped.Store(true)
		for _, rc := range conns {
			_ = rc.c.SetDeadline(time.Now())
		}
	})
	defer stopWatch()
	if err := p.measure(ctx, t, rs); err != nil {
		return nil, err
	}
	toldCents := p.tally(rs)
	rs.batches, rs.carried = uint64(rs.grabs), uint64(rs.grabs)
	rs.sizes = []BatchBucket{{Max: 1, Count: uint64(rs.grabs)}}
	if rs.grantBytes, err = t.memoryUsage(ctx, k.consumed, k.dedupe); err != nil {
		return nil, err
	}
	if err := checkClassic(ctx, t, k, o, amounts, rs.granted, toldCents, &p.probs); err != nil {
		return nil, err
	}
	rs.problems = p.probs.all()
	rs.peakRSSChecks = PeakRSSMB()
	return rs, nil
}

// dialClassic opens n connections of the classic design; on an error it
// closes those it opened.
func dialClassic(t *target, n int) ([]*respConn, error) {
	conns := make([]*respConn, 0, n)
	for w := range n {
		rc, err := dialRESP(t.addr, t.user, t.password, t.db)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connection %d: %w", w+1, err)
		}
		conns = append(conns, rc)
	}
	return conns, nil
}

// closeAll closes the connections.
func closeAll(conns []*respConn) {
	for _, rc := range conns {
		rc.Close()
	}
}

// classicWorker is worker w: one blocking EVAL per user in [from, to) on
// its own connection, until the pool is empty.
func (p *phase) classicWorker(rc *respConn, k classicKeys, w, from, to int) {
	lat, n := &p.lats[w], &p.counts[w]
	args := []string{"EVAL", ClassicScript, "4", k.pool, k.consumed, k.dedupe, ""}
	tk := ticker{bar: p.bar}
	defer tk.flush()
	var pk classicPacket
	for u := from; u < to && !p.stopped.Load(); u++ {
		args[6] = p.o.user(u)
		t0 := time.Now()
		reply, err := rc.do(args...)
		lat.add(time.Since(t0))
		if errors.Is(err, errNil) {
			// Each user grabs once, so nil means the pool is empty.
			n.grabs++
			n.soldOut++
			return
		}
		if err != nil {
			p.fail(err)
			return
		}
		n.grabs++
		n.granted++
		// A client decodes the packet it was given, as this one does.
		pk = classicPacket{}
		if err := json.Unmarshal(reply, &pk); err != nil {
			p.probs.add("reply %q is not a packet: %v", reply, err)
			continue
		}
		n.cents += pk.Money
		if pk.UserID != args[6] {
			p.probs.add("user %s was given a packet for %q", args[6], pk.UserID)
		}
		p.granted(u, args[6], pk.ID, pk.Money, "given")
		tk.tick()
	}
}

// loadClassic pushes the packets as JSON objects {"id": n, "money": n},
// in pipelined RPUSH chunks (the pool is RPOPped, so the last id goes
// first).
func loadClassic(ctx context.Context, t *target, k classicKeys, amounts []int64, bar Progress) error {
	defer bar.Done()
	c := t.client
	const chunk, pipeline = 1000, 16
	var cmds []rueidis.Completed
	flush := func(done int) error {
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("load the classic pool: %w", err)
			}
		}
		cmds = cmds[:0]
		bar.Set(int64(done))
		return nil
	}
	vals := make([]string, 0, chunk)
	var buf []byte
	for i := 0; i < len(amounts); i += chunk {
		vals = vals[:0]
		for j := i; j < min(i+chunk, len(amounts)); j++ {
			buf = append(buf[:0], `{"id":`...)
			buf = strconv.AppendInt(buf, int64(j+1), 10)
			buf = append(buf, `,"money":`...)
			buf = strconv.AppendInt(buf, amounts[j], 10)
			buf = append(buf, '}')
			vals = append(vals, string(buf))
		}
		cmds = append(cmds, c.B().Rpush().Key(k.pool).Element(vals...).Build())
		if len(cmds) == pipeline {
			if err := flush(min(i+chunk, len(amounts))); err != nil {
				return err
			}
		}
	}
	return flush(len(amounts))
}

// checkClassic checks the classic invariants from the contents of Redis:
// consumed + pool = packets, their money sums to the total, no user twice
// in consumed, the dedupe hash as long as consumed; and that the contents
// agree with what the clients were told and with the split.
func checkClassic(ctx context.Context, t *target, k classicKeys, o Options, amounts []int64, told, toldCents int64, probs *problems) error {
	if err := checkClassicLengths(ctx, t, k, o, told, probs); err != nil {
		return err
	}
	sc := &classicScan{
		c: t.client, o: o, amounts: amounts, probs: probs,
		seenUser: make([]bool, o.Users), seenPacket: make([]bool, o.Packets),
	}
	consumedCents, err := sc.list(ctx, k.consumed, true)
	if err != nil {
		return err
	}
	poolCents, err := sc.list(ctx, k.pool, false)
	if err != nil {
		return err
	}
	if consumedCents+poolCents != o.Total {
		probs.add("conservation: consumed %d + pool %d = %d cents, total %d", consumedCents, poolCents, consumedCents+poolCents, o.Total)
	}
	if consumedCents != toldCents {
		probs.add("clients were told of %d cents, the consumed list holds %d", toldCents, consumedCents)
	}
	if want := int64(min(o.Users, o.Packets)); told != want {
		probs.add("%d packets granted for %d users and %d packets", told, o.Users, o.Packets)
	}
	return nil
}

// checkClassicLengths compares the lengths of the lists and the dedupe
// hash with each other, the packets and what the clients were told.
func checkClassicLengths(ctx context.Context, t *target, k classicKeys, o Options, told int64, probs *problems) error {
	c := t.client
	llen := func(key string) (int64, error) { return c.Do(ctx, c.B().Llen().Key(key).Build()).AsInt64() }
	poolLen, err := llen(k.pool)
	if err != nil {
		return err
	}
	consumedLen, err := llen(k.consumed)
	if err != nil {
		return err
	}
	dedupeLen, err := c.Do(ctx, c.B().Hlen().Key(k.dedupe).Build()).AsInt64()
	if err != nil {
		return err
	}
	if consumedLen+poolLen != int64(o.Packets) {
		probs.add("consumed %d + pool %d != %d packets", consumedLen, poolLen, o.Packets)
	}
	if dedupeLen != consumedLen {
		probs.add("dedupe hash holds %d users, consumed list %d packets", dedupeLen, consumedLen)
	}
	if consumedLen != told {
		probs.add("clients were told of %d packets, the consumed list holds %d", told, consumedLen)
	}
	return nil
}

// classicScan reads the classic lists back and checks every packet in
// them: each once, with the split's amount, and in the consumed list each
// for one of our users, each user once.
type classicScan struct {
	c                    rueidis.Client
	o                    Options
	amounts              []int64
	probs                *problems
	seenUser, seenPacket []bool
}

// list checks the packets of list key and returns their sum.
func (sc *classicScan) list(ctx context.Context, key string, consumed bool) (sum int64, err error) {
	const page = 10000
	for from := int64(0); ; from += page {
		vals, err := sc.c.Do(ctx, sc.c.B().Lrange().Key(key).Start(from).Stop(from+page-1).Build()).AsStrSlice()
		if err != nil {
			return sum, fmt.Errorf("LRANGE %s: %w", key, err)
		}
		for _, v := range vals {
			sum += sc.packet(key, v, consumed)
		}
		if len(vals) < page {
			return sum, nil
		}
	}
}

// packet checks one packet v of list key and returns its money.
func (sc *classicScan) packet(key, v string, consumed bool) int64 {
	var p classicPacket
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		sc.probs.add("%s holds %q: %v", key, v, err)
		return 0
	}
	if p.ID < 1 || p.ID > int64(sc.o.Packets) {
		sc.probs.add("%s holds packet %d, outside 1..%d", key, p.ID, sc.o.Packets)
		return p.Money
	}
	if sc.seenPacket[p.ID-1] {
		sc.probs.add("packet %d is in the lists twice", p.ID)
	}
	sc.seenPacket[p.ID-1] = true
	if p.Money != sc.amounts[p.ID-1] {
		sc.probs.add("packet %d holds %d cents; the split made it %d", p.ID, p.Money, sc.amounts[p.ID-1])
	}
	if !consumed {
		return p.Money
	}
	n, err := strconv.Atoi(strings.TrimPrefix(p.UserID, "u"))
	if err != nil || !strings.HasPrefix(p.UserID, "u") || n < 1 || n > sc.o.Users {
		sc.probs.add("consumed packet %d names user %q, not one of ours", p.ID, p.UserID)
		return p.Money
	}
	if sc.seenUser[n-1] {
		sc.probs.add("user %s is in the consumed list twice", p.UserID)
	}
	sc.seenUser[n-1] = true
	return p.Money
}
